package service

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/server"
)

func TestMetricsExposition(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{}, roleOperator)
	h.Up(t.Context(), "wg0")
	h.Up(t.Context(), "ovs")
	hs := time.Unix(1_700_000_000, 0)
	h.Handshake("wg0", 0, hs, netip.AddrPort{})
	h.Traffic("wg0", 0, 1234, 5678)
	h.Connect("ovs", "alice", 100, 200)
	h.Connect("ovs", "alice", 1, 2) // the same common name twice: summed
	h.Connect("ovs", "bob", 10, 20)
	h.Connect("ovs", "bad\xffname", 1, 1) // not UTF-8: its series is left out
	h.SetCounters([]EngineCounter{
		{Tunnel: "wg0", Name: "handshakes_rejected_total", Help: "Handshakes refused.", Labels: [][2]string{{"reason", "mac1"}}, Value: 3},
		{Tunnel: "wg0", Name: "handshakes_rejected_total", Help: "Handshakes refused.", Labels: [][2]string{{"reason", "replay"}}, Value: 1},
		{Tunnel: "wg0", Name: "bad name!", Value: 1},                           // invalid: left out
		{Tunnel: "wg0", Name: "x_total", Labels: [][2]string{{"tunnel", "y"}}}, // label clash: left out
	})
	code, body, hdr := ts.do("GET", "/metrics", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", code, hdr.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		`wireguard_device_info{device="wg0",public_key="` + FakeKeyD + `"} 1`,
		`wireguard_peer_info{allowed_ips="10.9.0.2/32",device="wg0",endpoint="192.0.2.1:51820",name="Alice's phone",public_key="` + FakeKeyA + `"} 1`,
		`wireguard_peer_info{allowed_ips="10.9.0.3/32,fd00::3/128",device="wg0",endpoint="",name="",public_key="` + FakeKeyB + `"} 1`,
		`wireguard_peer_receive_bytes_total{device="wg0",public_key="` + FakeKeyA + `"} 1234`,
		`wireguard_peer_transmit_bytes_total{device="wg0",public_key="` + FakeKeyA + `"} 5678`,
		`wireguard_peer_last_handshake_seconds{device="wg0",public_key="` + FakeKeyA + `"} 1.7e+09`,
		`wireguard_peer_last_handshake_seconds{device="wg0",public_key="` + FakeKeyB + `"} 0`,
		`openvpn_server_client_received_bytes_total{common_name="alice",tunnel="ovs"} 101`,
		`openvpn_server_client_sent_bytes_total{common_name="bob",tunnel="ovs"} 20`,
		`openvpn_server_connected_clients{tunnel="ovs"} 4`,
		`wirelane_tunnel_state{kind="wireguard",state="up",tunnel="wg0"} 1`,
		`wirelane_tunnel_state{kind="wireguard",state="down",tunnel="wg0"} 0`,
		`wirelane_tunnel_receive_bytes_total{kind="wireguard",tunnel="wg0"} 1234`,
		`wirelane_handshakes_rejected_total{reason="mac1",tunnel="wg0"} 3`,
		`wirelane_event_subscribers 0`,
		`wirelane_event_subscribers_dropped_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") && !(want == "go_goroutines" && strings.Contains(text, want)) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	for _, bad := range []string{"bad name", `tunnel="y"`, "bad\xff", "since=", "remote=", "address="} {
		if strings.Contains(text, bad) {
			t.Errorf("the exposition holds %q", bad)
		}
	}
	promtool(t, body)
}

// promtool runs `promtool check metrics` on an exposition when promtool is
// installed (Debian's prometheus package; scripts/test.sh installs it).
func promtool(t *testing.T, exposition []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed (apt package prometheus): the exposition is not linted")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestMetricsOnTCP(t *testing.T) {
	h := NewFakeHost()
	s := New(h, Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeMetrics(l) }()
	defer func() {
		s.Shutdown(t.Context())
		<-done
	}()
	base := "http://" + l.Addr().String()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`wirelane_tunnel_state{kind="wireguard",state="down",tunnel="wg0"} 1`)) {
		t.Fatalf("TCP /metrics: %s\n%s", resp.Status, b)
	}
	for _, p := range []string{"/v1/tunnels", "/v1/events"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("TCP %s: %s; only /metrics is served there", p, resp.Status)
		}
	}
	resp, err = http.Post(base+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /metrics on TCP: %s", resp.Status)
	}
}

// TestOVPNServerCountersExport: a server's and a client's counters in one
// exposition: the drops, both tunnels' TUN errors in one family, and a
// series per failed-handshake reason (the real counts are the end-to-end
// tests': internal/testkit/e2e service_counters_test.go).
func TestOVPNServerCountersExport(t *testing.T) {
	var st server.Stats
	st.Spoofed.Add(7)
	st.TUNErrors.Add(2)
	h := NewFakeHost()
	h.SetCounters(append(append(OVPNServerCounters("ovs", &st), EngineGOMAXPROCS("ovs", 3)), OVPNClientCounters("ovc", OVPNClientStats{DroppedControl: 1, DroppedData: 4, TUNErrors: 5, SocketSendErrors: 6, DroppedCompressed: 7})...))
	ts := startService(t, h, Config{}, roleRoot)
	_, body, _ := ts.do("GET", "/metrics", "")
	want := []string{
		`wirelane_openvpn_dropped_packets_total{reason="spoofed",tunnel="ovs"} 7`,
		`wirelane_openvpn_dropped_packets_total{reason="no_route",tunnel="ovs"} 0`,
		`wirelane_openvpn_dropped_packets_total{reason="replies_withheld",tunnel="ovs"} 0`,
		`wirelane_tun_errors_total{tunnel="ovs"} 2`,
		"# TYPE wirelane_engine_gomaxprocs gauge",
		`wirelane_engine_gomaxprocs{tunnel="ovs"} 3`,
		`wirelane_openvpn_dropped_packets_total{reason="bad_data",tunnel="ovc"} 4`,
		`wirelane_tun_errors_total{tunnel="ovc"} 5`,
		`wirelane_openvpn_dropped_packets_total{reason="compressed",tunnel="ovc"} 7`,
		`wirelane_openvpn_dropped_packets_total{reason="decompress_failed",tunnel="ovs"} 0`,
		`wirelane_socket_errors_total{op="send",tunnel="ovc"} 6`,
		`wirelane_socket_errors_total{op="send",tunnel="ovs"} 0`,
	}
	for _, r := range server.HandshakeFailureReasons() {
		want = append(want, `wirelane_openvpn_handshakes_rejected_total{reason="`+r+`",tunnel="ovs"} 0`)
	}
	for _, want := range want {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	promtool(t, body)
}
