package client

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/config"
)

// <connection> blocks against a real openvpn 2.6 server: the first block
// (TCP to a closed port) fails, the second (UDP to a socket that never
// answers) gives up after its own server-poll-timeout of 1 s instead of
// the 8 s handshake timeout, the third (its own proto and port, UDP to
// the server) connects; pings cross the tunnel.
func TestE2EConnectionBlocks(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false)
	var silent net.PacketConn
	if err := testnet.InNamespace(srv.ns, func() {
		var err error
		silent, err = net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Error(err)
		}
	}); err != nil || silent == nil {
		t.Fatalf("silent socket: %v", err)
	}
	defer silent.Close()
	silentPort := silent.LocalAddr().(*net.UDPAddr).Port
	text := fmt.Sprintf("client\ndev tun\nnobind\nremote-cert-tls server\nproto tcp\n"+
		"<connection>\nremote 127.0.0.1 1\n</connection>\n"+
		"<connection>\nremote 127.0.0.1 %d udp\nserver-poll-timeout 1\n</connection>\n"+
		"<connection>\nremote 127.0.0.1\nport %d\nproto udp\n</connection>\n"+
		"<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n", silentPort, srv.port, e.pki.CAPEM, e.clientCert, e.clientKey)
	cfg, err := config.Parse([]byte(text), "blocks.ovpn", e.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Remotes) != 3 || cfg.Remotes[0].Proto != config.TCP || cfg.Remotes[2].Proto != config.UDP || cfg.Remotes[1].PollTimeout != 1 {
		t.Fatalf("remotes %+v", cfg.Remotes)
	}
	var tried []string
	opts := srv.options(t)
	opts.OnEvent = func(ev Event) {
		if ev.State == StateTCPConnect || ev.State == StateConnecting {
			tried = append(tried, fmt.Sprintf("%s %v", ev.State, ev.Err != nil))
		}
	}
	start := time.Now()
	s := dial(t, cfg, opts)
	defer s.Close()
	if got := s.RemoteAddr().Port(); got != uint16(srv.port) || s.Transport() != "UDPv4" {
		t.Fatalf("connected to port %d over %s", got, s.Transport())
	}
	t.Logf("connected after %v; attempts %v", time.Since(start).Round(time.Millisecond), tried)
	want := []string{"TCP_CONNECT false", "TCP_CONNECT true", "CONNECTING false", "CONNECTING true", "CONNECTING false"}
	if fmt.Sprint(tried) != fmt.Sprint(want) {
		t.Fatalf("attempts %v, want %v", tried, want)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 6*time.Second {
		t.Fatalf("connected after %v: the silent block's server-poll-timeout 1 was not what ended it", d)
	}
	ping(t, s, 1)
	ping(t, s, 2)
}
