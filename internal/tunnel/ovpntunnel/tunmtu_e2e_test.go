package ovpntunnel

// A real OpenVPN 2.6 server's tun-mtu, pushed to a client that announces
// IV_MTU (OpenVPN 2.6 pushes `tun-mtu N` to such clients by itself),
// becomes the MTU of `wirelane ovpn connect`'s device over the file's
// tun-mtu, and full-size packets of it cross with DF set; then a Wirelane
// server's `push "tun-mtu 1380"` does the same:
//
//	ovmtuc (client side)                       ovmtus (server side)
//	  wlc0 10.19.0.2  <- wirelane connect          ovs0 10.19.0.1  <- openvpn, tun-mtu 1400
//	  omc1 192.168.79.2  =========veth=========    oms1 192.168.79.1

import (
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectAppliesPushedTunMTU(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane MTU CA", client: "cli1", srvNS: "ovmtus", cliNS: "ovmtuc",
		srvIf: "oms1", cliIf: "omc1", net: "192.168.79", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.79.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.19.0.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"tun-mtu 1400\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.79.1 1194 udp\nnobind\nremote-cert-tls server\ntun-mtu 1450\n" + tb.clientInline(),
	})
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	if !strings.Contains(cli.out.String(), "mtu 1400 pushed by the server") || !strings.Contains(cli.out.String(), "mtu 1400, up") {
		t.Fatalf("client output does not show the pushed MTU:\n%s", cli.out.String())
	}
	if link := netns.Run(t, tb.cliNS, "ip", "link", "show", "wlc0"); !strings.Contains(link, "mtu 1400 ") {
		t.Fatalf("device: %s, want mtu 1400", link)
	}
	// Full-size packets of the pushed MTU cross both ways unfragmented.
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", "1372", "10.19.0.1")
	cli.interrupt(t)

	t.Run("wirelane server", func(t *testing.T) {
		tb.write(t, map[string]string{
			"wls.conf": "port 1195\nproto udp4\nlocal 192.168.79.1\ndev wls0\ntopology subnet\nserver 10.19.1.0 255.255.255.0\n" +
				serverCreds + "push \"tun-mtu 1380\"\nkeepalive 10 60\n",
			"cli2.ovpn": "client\ndev tun\nremote 192.168.79.1 1195 udp\nnobind\nremote-cert-tls server\n" + tb.clientInline(),
		})
		srv := startHelper(t, tb.srvNS, "serve", tb.path("wls.conf"))
		srv.waitFor(t, "listening on udp", 10*time.Second)
		cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc1", tb.path("cli2.ovpn"))
		cli.waitFor(t, "tunnel up", 15*time.Second)
		if link := netns.Run(t, tb.cliNS, "ip", "link", "show", "wlc1"); !strings.Contains(link, "mtu 1380 ") {
			t.Fatalf("device: %s, want mtu 1380", link)
		}
		netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", "1352", "10.19.1.1")
		cli.interrupt(t)
	})
}
