package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
)

func TestShowJSONListsOpenVPNTunnelsBesideWireGuard(t *testing.T) {
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tun := ovpntunnel.TunnelStatus{Kind: "client", PID: 42, Interface: "tun7", Remote: "192.0.2.1:1194",
		Proto: "udp", Cipher: "AES-256-GCM", Address: "10.8.0.2/24", Since: since, RxBytes: 10, TxBytes: 20}
	var buf bytes.Buffer
	if err := writeShowJSON(&buf, nil, nil, []ovpntunnel.TunnelStatus{tun}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema     int               `json:"schema"`
		Interfaces []json.RawMessage `json:"interfaces"`
		OpenVPN    []struct {
			Kind      string `json:"kind"`
			Interface string `json:"interface"`
			Cipher    string `json:"cipher"`
			RxBytes   uint64 `json:"rx_bytes"`
		} `json:"openvpn"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.Bytes())
	}
	if doc.Schema != 1 || doc.Interfaces == nil || len(doc.Interfaces) != 0 {
		t.Errorf("WireGuard part wrong: %s", buf.Bytes())
	}
	if len(doc.OpenVPN) != 1 || doc.OpenVPN[0].Interface != "tun7" || doc.OpenVPN[0].Kind != "client" ||
		doc.OpenVPN[0].Cipher != "AES-256-GCM" || doc.OpenVPN[0].RxBytes != 10 {
		t.Errorf("OpenVPN part wrong: %s", buf.Bytes())
	}

	// With no OpenVPN tunnel the key is still there, as an empty list.
	buf.Reset()
	if err := writeShowJSON(&buf, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"openvpn": []`)) {
		t.Errorf("no empty openvpn list:\n%s", buf.Bytes())
	}
	if _, ok := findOvpn([]ovpntunnel.TunnelStatus{tun}, "tun7"); !ok {
		t.Error("findOvpn missed tun7")
	}
	if _, ok := findOvpn([]ovpntunnel.TunnelStatus{tun}, "wg0"); ok {
		t.Error("findOvpn found wg0")
	}
}
