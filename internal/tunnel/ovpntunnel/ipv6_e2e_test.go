package ovpntunnel

// `wirelane ovpn connect` takes the IPv6 configuration a real OpenVPN 2.6
// server pushes (server-ipv6), and replaces it when the server comes back
// with another one:
//
//	o6c (client side)                               o6s (server side)
//	  wlc0 10.13.0.2/24 fd42:42::1000/64  <- connect   ovs0 10.13.0.1 fd42:42::1  <- openvpn
//	  c1 192.168.86.2  ============veth============   s1 192.168.86.1
//	                                                   lo fd99::1 (behind route-ipv6)
//
// Round 1: address and routes (route-ipv6 via the server's tunnel address,
// redirect-gateway ipv6 as 2000::/4 and 3000::/4), ping -6 to the server
// and through the pushed route, the address in the status file. Round 2:
// the server is killed and restarted with fd43:43::/64 and another
// route-ipv6; the client reconnects and carries only the new ones.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectIPv6FromOpenVPNServer(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane IPv6 CA", client: "cli1", srvNS: "o6s", cliNS: "o6c",
		srvIf: "s1", cliIf: "c1", net: "192.168.86", need: []string{"openvpn", "ping"}})
	serverConf := func(prefix, route string) string {
		return "port 1194\nproto udp4\nlocal 192.168.86.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.13.0.0 255.255.255.0\nserver-ipv6 " + prefix + "\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"push \"route-ipv6 " + route + "\"\npush \"redirect-gateway def1 ipv6\"\nkeepalive 1 3\nverb 3\n"
	}
	tb.write(t, map[string]string{
		"server.conf": serverConf("fd42:42::/64", "fd99::/64"),
		"cli1.ovpn": "client\ndev tun\nremote 192.168.86.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
	})
	netns.Run(t, tb.srvNS, "ip", "-6", "addr", "add", "fd99::1/128", "dev", "lo")
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) }) // runs before the server stops

	check := func(round int, addr, gw, route string, gone []string) {
		t.Helper()
		if a := netns.Run(t, tb.cliNS, "ip", "-6", "addr", "show", "dev", "wlc0"); !strings.Contains(a, addr) {
			t.Fatalf("round %d: wlc0 lacks %s:\n%s", round, addr, a)
		}
		routes := netns.Run(t, tb.cliNS, "ip", "-6", "route", "show")
		for _, want := range []string{route + " via " + gw + " dev wlc0", "2000::/4 via " + gw + " dev wlc0",
			"3000::/4 via " + gw + " dev wlc0"} {
			if !strings.Contains(routes, want) {
				t.Fatalf("round %d: IPv6 routes lack %q:\n%s", round, want, routes)
			}
		}
		for _, g := range gone {
			if all := netns.Run(t, tb.cliNS, "ip", "-6", "addr", "show") + routes; strings.Contains(all, g) {
				t.Fatalf("round %d: %s still configured:\n%s", round, g, all)
			}
		}
		// The IPv4 side is still there.
		if r := netns.Run(t, tb.cliNS, "ip", "-4", "route", "show"); !strings.Contains(r, "0.0.0.0/1 via 10.13.0.1 dev wlc0") {
			t.Fatalf("round %d: IPv4 redirect missing:\n%s", round, r)
		}
		netns.Run(t, tb.cliNS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", gw)
		netns.Run(t, tb.cliNS, "ping", "-4", "-c", "1", "-W", "2", "10.13.0.1")
	}

	if !strings.Contains(cli.out.String(), "IPv6 fd42:42::1000/64 (remote fd42:42::1)") {
		t.Fatalf("connect output lacks the pushed IPv6 address:\n%s", cli.out.String())
	}
	check(1, "fd42:42::1000/64", "fd42:42::1", "fd99::/64", nil)
	netns.Run(t, tb.cliNS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd99::1")
	netns.Eventually(t, 5*time.Second, "IPv6 address in the status", func() error {
		st, err := Status()
		if err != nil {
			return err
		}
		if len(st) != 1 || st[0].Address6 != "fd42:42::1000/64" || st[0].Address != "10.13.0.2/24" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})

	ovs.cmd.Process.Kill()
	<-ovs.done
	tb.write(t, map[string]string{"server.conf": serverConf("fd43:43::/64", "fd98::/64")})
	ovs = tb.startOpenVPN(t, tb.srvNS, "server.conf")
	netns.Eventually(t, 30*time.Second, "client reconnected", func() error {
		if !strings.Contains(cli.out.String(), "tunnel up again") {
			select {
			case <-cli.done:
				t.Fatalf("connect exited (%v):\n%s", cli.err, cli.out.String())
			default:
			}
			return fmt.Errorf("not yet")
		}
		return nil
	})
	check(2, "fd43:43::1000/64", "fd43:43::1", "fd98::/64", []string{"fd42:42::", "fd99::/64"})
	t.Logf("connect output:\n%s", cli.out.String())
}

// `wirelane ovpn connect` to an IPv6-only OpenVPN 2.6 server (server-ipv6
// without server): the device gets only the pushed IPv6 address and
// reaches the server over IPv6.
func TestE2EConnectIPv6OnlyOpenVPNServer(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane IPv6-only CA", client: "cli1", srvNS: "o7s", cliNS: "o7c",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.87.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server-ipv6 fd42:45::/64\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 1 3\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
	})
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) })
	if out := cli.out.String(); !strings.Contains(out, "connected: fd42:45::1000/64 on wlc0") || !strings.Contains(out, "pushed options: IPv6 fd42:45::1000/64") {
		t.Fatalf("connect output:\n%s", out)
	}
	if a := netns.Run(t, tb.cliNS, "ip", "-6", "addr", "show", "dev", "wlc0"); !strings.Contains(a, "fd42:45::1000/64") {
		t.Fatalf("wlc0 lacks fd42:45::1000/64:\n%s", a)
	}
	if a := netns.Run(t, tb.cliNS, "ip", "-4", "addr", "show", "dev", "wlc0"); strings.Contains(a, "inet ") {
		t.Fatalf("wlc0 has an IPv4 address:\n%s", a)
	}
	netns.Run(t, tb.cliNS, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd42:45::1")
}
