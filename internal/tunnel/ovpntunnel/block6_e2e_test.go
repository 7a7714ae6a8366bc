package ovpntunnel

// block-ipv6 against a real OpenVPN 2.6 server that has no IPv6 for its
// clients, on a client host that has IPv6 of its own (the leak):
//
//	obc (client side)                              obs (server side)
//	  wlc0 10.14.0.2  <- wirelane connect            ovs0 10.14.0.1  <- openvpn
//	  c1 192.168.88.2 2001:db8:88::2  ====veth====   s1 192.168.88.1 2001:db8:88::1
//	     IPv6 default via 2001:db8:88::1             lo 2001:db8:99::1
//
// Without the tunnel, ping -6 2001:db8:99::1 goes out through c1. With
// the server pushing redirect-gateway def1 and block-ipv6 (round 1), or
// the .ovpn file carrying block-ipv6 (round 2), 2001:db8:99::1 is routed
// into wlc0 and answered there with ICMPv6 "no route"; IPv4 still crosses
// the tunnel. After Ctrl-C the IPv6 path through c1 works again.

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectBlockIPv6(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Block CA", client: "cli1", srvNS: "obs", cliNS: "obc",
		srvIf: "s1", cliIf: "c1", net: "192.168.88", need: []string{"openvpn", "ping"}})
	serverConf := func(extra string) string {
		return "port 1194\nproto udp4\nlocal 192.168.88.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.14.0.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"push \"redirect-gateway def1\"\n" + extra + "keepalive 1 3\nverb 3\n"
	}
	clientConf := func(extra string) string {
		return "client\ndev tun\nremote 192.168.88.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			extra + tb.clientInline()
	}
	netns.Run(t, tb.srvNS, "ip", "-6", "addr", "add", "2001:db8:88::1/64", "dev", "s1", "nodad")
	netns.Run(t, tb.srvNS, "ip", "-6", "addr", "add", "2001:db8:99::1/128", "dev", "lo")
	netns.Run(t, tb.cliNS, "ip", "-6", "addr", "add", "2001:db8:88::2/64", "dev", "c1", "nodad")
	netns.Run(t, tb.cliNS, "ip", "-6", "route", "add", "default", "via", "2001:db8:88::1")
	leakPath := func(round int, what string) {
		t.Helper()
		if r := netns.Run(t, tb.cliNS, "ip", "-6", "route", "get", "2001:db8:99::1"); !strings.Contains(r, "dev c1") {
			t.Fatalf("round %d, %s: 2001:db8:99::1 not routed through c1: %s", round, what, r)
		}
		netns.Run(t, tb.cliNS, "ping", "-6", "-c", "1", "-W", "2", "2001:db8:99::1")
	}

	for round, c := range []struct{ server, client string }{
		{server: "push \"block-ipv6\"\n"},
		{client: "block-ipv6\n"},
	} {
		round++
		leakPath(round, "before connecting")
		tb.write(t, map[string]string{"server.conf": serverConf(c.server), "cli1.ovpn": clientConf(c.client)})
		ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
		cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
		cli.waitFor(t, "tunnel up", 15*time.Second)
		if out := cli.out.String(); !strings.Contains(out, "block-ipv6: IPv6 packets into the tunnel are answered with ICMPv6 no-route from fe80::7") ||
			!strings.Contains(out, "2000::/4, 3000::/4 on-link") {
			t.Fatalf("round %d: connect output:\n%s", round, out)
		}
		if r := netns.Run(t, tb.cliNS, "ip", "-6", "route", "get", "2001:db8:99::1"); !strings.Contains(r, "dev wlc0") {
			t.Fatalf("round %d: 2001:db8:99::1 not routed into the tunnel: %s", round, r)
		}
		out, err := netns.Try(tb.cliNS, nil, "ping", "-6", "-c", "1", "-W", "2", "2001:db8:99::1")
		if err == nil || !strings.Contains(out, "fe80::7") || !strings.Contains(out, "Destination unreachable: No route") {
			t.Fatalf("round %d: ping -6 through the blocked tunnel: %v\n%s", round, err, out)
		}
		netns.Run(t, tb.cliNS, "ping", "-c", "1", "-W", "2", "10.14.0.1")
		cli.interrupt(t)
		ovs.cmd.Process.Signal(syscall.SIGINT)
		<-ovs.done
		leakPath(round, "after Ctrl-C")
		if round == 1 {
			t.Logf("connect output:\n%s", cli.out.String())
		}
	}
}
