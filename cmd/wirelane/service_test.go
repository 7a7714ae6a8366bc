package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const (
	svcPubA = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	svcPubB = "0CpSGmRYqUs9GfMWgI2k7pAQBgY4mOiSWoMYa/0qKHY="
)

func TestShowOfAServiceTunnelHasItsNamesAndHidesItsKeys(t *testing.T) {
	ep := netip.MustParseAddrPort("192.0.2.1:51820")
	hs := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	tn := service.Tunnel{Name: "wg0", Kind: service.KindWireGuard, State: service.StateUp, PublicKey: svcPubA, ListenPort: 51820, FwMark: 0x10,
		Peers: []service.Peer{{PublicKey: svcPubB, Name: "laptop", Endpoint: &ep, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")},
			LatestHandshake: &hs, RxBytes: 2048, TxBytes: 1024, HasPresharedKey: true, PersistentKeepalive: 25}}}
	d, names := deviceOf(&tn)
	var b bytes.Buffer
	if err := wgquick.FormatDeviceNamed(&b, d, names, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"interface: wg0", "public key: " + svcPubA, "private key: (hidden)", "fwmark: 0x10", "peer: " + svcPubB, "name: laptop",
		"preshared key: (hidden)", "endpoint: 192.0.2.1:51820", "allowed ips: 10.0.0.2/32", "latest handshake: 1 minute", "transfer: 2.00 KiB received, 1.00 KiB sent", "every 25 seconds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeShowJSON(&b, []*wgtypes.Device{d}, names, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"name": "laptop"`) || !strings.Contains(b.String(), `"has_preshared_key": true`) || strings.Contains(b.String(), "AQAAAA") {
		t.Errorf("show --json:\n%s", b.String())
	}
}

// TestShowPrintsTheServicesCounters: through the service, `show` prints a
// tunnel's troubles (its engine counters that are not zero) in its
// interface's section, before the peers, and nothing of them for a tunnel
// without trouble or without a service.
func TestShowPrintsTheServicesCounters(t *testing.T) {
	tn := service.Tunnel{Name: "wg0", Kind: service.KindWireGuard, State: service.StateUp, PublicKey: svcPubA, ListenPort: 51820,
		Peers: []service.Peer{{PublicKey: svcPubB}}}
	d, names := deviceOf(&tn)
	var counters countersOf = func(iface string) ([]service.Counter, bool) {
		if iface != "wg0" {
			return nil, false
		}
		return []service.Counter{
			{Name: "wirelane_wireguard_dropped_packets_total", Labels: map[string]string{"reason": "malformed"}, Value: 20},
			{Name: "wirelane_wireguard_dropped_packets_total", Labels: map[string]string{"reason": "decrypt"}},
			{Name: "wirelane_socket_errors_total", Labels: map[string]string{"op": "receive"}, Value: 2},
		}, true
	}
	var b bytes.Buffer
	if err := wgquick.FormatDeviceLines(&b, d, names, counters.lines("wg0"), time.Now()); err != nil {
		t.Fatal(err)
	}
	want := "  listening port: 51820\n  dropped: malformed 20\n  socket errors: receive 2\n\npeer: " + svcPubB
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "decrypt") {
		t.Errorf("show, want %q in:\n%s", want, b.String())
	}
	if l := counters.lines("wg1"); l != nil {
		t.Errorf("a tunnel the service does not run: %q", l)
	}
	if l := countersOf(nil).lines("wg0"); l != nil {
		t.Errorf("without a service: %q", l)
	}
}

func TestListFromTheServiceKeepsOpenVPNTunnelsRunOutsideIt(t *testing.T) {
	hs := time.Unix(1700000000, 0)
	ts := []service.Tunnel{
		{Name: "wg0", Kind: service.KindWireGuard, State: service.StateUp, Config: "/etc/wireguard/wg0.conf", Peers: []service.Peer{{PublicKey: svcPubB, LatestHandshake: &hs}}},
		{Name: "bad", Kind: service.KindWireGuard, State: service.StateFailed, Error: "bad.conf:3: invalid ListenPort", Config: "/etc/wireguard/bad.conf"},
		{Name: "office", Kind: service.KindOpenVPNClient, State: service.StateUp, Config: "/etc/wirelane/openvpn-client/office.ovpn", Peers: []service.Peer{{CommonName: "server"}}},
	}
	ovpns := []ovpntunnel.TunnelStatus{
		{Kind: ovpntunnel.KindClient, PID: 1, Interface: "office", Config: "/etc/wirelane/openvpn-client/office.ovpn"},
		{Kind: ovpntunnel.KindServer, PID: 42, Interface: "tun9", Config: "/root/server.conf"},
	}
	es := serviceEntries(ts, ovpns)
	if len(es) != 4 {
		t.Fatalf("%d rows: %+v", len(es), es)
	}
	if es[0].Name != "bad" || es[0].State != "failed" || es[0].Error == "" || es[1].Name != "office" || es[1].Peers != 0 ||
		es[2].Name != "tun9" || es[2].PID != 42 || es[3].Name != "wg0" || es[3].Peers != 1 || es[3].LatestHandshake != hs.Unix() {
		t.Errorf("rows: %+v", es)
	}
	var b bytes.Buffer
	writeListText(&b, es, true)
	if !strings.Contains(b.String(), "failed: bad.conf:3: invalid ListenPort") {
		t.Errorf("the table does not show the error:\n%s", b.String())
	}
}

func TestEventsReadAsText(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.Local)
	rx, tx := uint64(2048), uint64(1024)
	for _, c := range []struct {
		e    service.Event
		want string
	}{
		{service.Event{Type: service.EventTunnel, Tunnel: "wg0", State: service.StateDown, Initial: true}, "12:00:00 wg0: down (now)"},
		{service.Event{Type: service.EventTunnel, Tunnel: "wg0", State: service.StateUp, Reason: "requested"}, "12:00:00 wg0: up (requested)"},
		{service.Event{Type: service.EventTunnel, Tunnel: "wg0", State: service.StateFailed, Reason: "up failed", Error: "boom"}, "12:00:00 wg0: failed (up failed): boom"},
		{service.Event{Type: service.EventTunnels, Tunnel: "wg1", Change: service.ChangeAdded, Status: &service.Tunnel{Kind: service.KindGateway}}, "12:00:00 wg1: added (gateway)"},
		{service.Event{Type: service.EventPeer, Tunnel: "wg0", Change: service.ChangeHandshake, Peer: &service.Peer{PublicKey: svcPubB, Name: "laptop"}}, "12:00:00 wg0: peer laptop: handshake"},
		{service.Event{Type: service.EventPeer, Tunnel: "wg0", Change: service.ChangeHandshakeExpired, Peer: &service.Peer{PublicKey: svcPubB}}, "12:00:00 wg0: peer 0CpSGmRY...: handshake expired"},
		{service.Event{Type: service.EventTransfer, Tunnel: "wg0", RxBytes: &rx, TxBytes: &tx}, "12:00:00 wg0: transfer 2.00 KiB received, 1.00 KiB sent"},
		{service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "challenge", Prompt: "PIN"}}, "12:00:00 office: asks for credentials (challenge): PIN"},
		{service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "password", Username: "alice"}}, "12:00:00 office: asks for credentials (password of alice)"},
		{service.Event{Type: service.EventStopping}, "12:00:00 the service is stopping"},
	} {
		c.e.Time = at
		var b bytes.Buffer
		writeEvent(&b, &c.e)
		if got := strings.TrimSuffix(b.String(), "\n"); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
