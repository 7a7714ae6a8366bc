package ovpntunnel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestE2EReloadServerPool reloads a server's pool under a real OpenVPN
// 2.6 client: a larger pool holding its address keeps it connected (the
// device's address becomes the new prefix, no ping lost); a pool
// elsewhere sends it RESTART, and it comes back with an address of the
// new pool.
func TestE2EReloadServerPool(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Pool Reload CA", client: "desk", srvNS: "orps", cliNS: "orpc",
		srvIf: "s1", cliIf: "c1", net: "192.168.86", need: []string{"openvpn", "ping"}})
	conf := func(pool string) string {
		return "port 1194\nproto udp\ndev wlrp0\ntopology subnet\nserver " + pool + "\n" + serverCreds + "keepalive 10 60\ndata-ciphers AES-256-GCM\n"
	}
	tb.write(t, map[string]string{
		"server.conf": conf("10.9.0.0 255.255.255.0"), "desk.crt": string(tb.cliCert), "desk.key": string(tb.cliKey),
		"desk.conf": "client\ndev tun\nproto udp\nremote 192.168.86.1 1194\nnobind\nremote-cert-tls server\nca ca.crt\ncert desk.crt\nkey desk.key\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nconnect-retry 1\nverb 3\n",
	})
	srv := startHelper(t, tb.srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	desk := tb.startOpenVPN(t, tb.cliNS, "desk.conf")
	reload := func() *Plan {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, _, err := ReloadRunning(ctx, "wlrp0", false)
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		return p
	}
	addrs := func() string { return netns.Run(t, tb.srvNS, "ip", "-4", "-o", "addr", "show", "dev", "wlrp0") }

	tb.write(t, map[string]string{"server.conf": conf("10.9.0.0 255.255.254.0")})
	ping := netns.Command(tb.cliNS, "ping", "-n", "-q", "-i", "0.01", "-c", "150", "-W", "1", "10.9.0.1")
	done := make(chan string, 1)
	go func() { out, _ := ping.CombinedOutput(); done <- string(out) }()
	time.Sleep(500 * time.Millisecond)
	p := reload()
	if text := strings.Join(p.Lines, "\n"); !strings.Contains(text, "tunnel address: 10.9.0.1/24 -> 10.9.0.1/23") || strings.Contains(text, "disconnect") {
		t.Errorf("grow plan:\n%s", text)
	}
	if out := <-done; !strings.Contains(out, " 0% packet loss") {
		t.Errorf("pings lost while the pool grew:\n%s", out)
	}
	if a := addrs(); !strings.Contains(a, "10.9.0.1/23") || strings.Contains(a, "10.9.0.1/24") {
		t.Errorf("server addresses after the pool grew:\n%s", a)
	}

	tb.write(t, map[string]string{"server.conf": conf("10.10.0.0 255.255.255.0")})
	p = reload()
	if text := strings.Join(p.Lines, "\n"); !strings.Contains(text, `disconnect client "desk" (10.9.0.2): its address 10.9.0.2 is not in the new pool 10.10.0.0/24`) {
		t.Errorf("move plan:\n%s", text)
	}
	if a := addrs(); !strings.Contains(a, "10.10.0.1/24") || strings.Contains(a, "10.9.0.1") {
		t.Errorf("server addresses after the move:\n%s", a)
	}
	desk.waitFor(t, "Connection reset command was pushed by server", 10*time.Second)
	netns.Eventually(t, 20*time.Second, "desk reconnected in the new pool", func() error {
		_, err := netns.Try(tb.cliNS, nil, "ping", "-c", "1", "-W", "1", "10.10.0.1")
		return err
	})
	if a := netns.Run(t, tb.cliNS, "ip", "-4", "-o", "addr"); !strings.Contains(a, "10.10.0.2/24") {
		t.Errorf("desk's addresses:\n%s", a)
	}
}
