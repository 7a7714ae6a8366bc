package ovpntunnel

// The phases of `wirelane ovpn connect` against a real OpenVPN 2.6
// server, in order, as lines and as events; a first remote that does not
// resolve; resolv-retry giving up:
//
//	opc (client side)                          ops (server side)
//	  wlc0 10.13.0.2  <- wirelane connect        ovs0 10.13.0.1  <- openvpn --server
//	  c1 192.168.91.2  ==========veth==========  s1 192.168.91.1
//
// The client namespace has no route to the host's name servers, so every
// lookup fails at once.

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectPhases(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Phases CA", client: "cli1", srvNS: "ops", cliNS: "opc",
		srvIf: "s1", cliIf: "c1", net: "192.168.91", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.91.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.13.0.0 255.255.255.0\n" + serverCreds + "push \"route 10.97.0.0 255.255.255.0\"\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote nosuch.invalid 1194 udp\nremote 192.168.91.1 1194 udp\nnobind\nremote-cert-tls server\n" +
			"resolv-retry infinite\npersist-key\nscript-security 2\nup /etc/openvpn/update-resolv-conf\n" + tb.clientInline(),
	})
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelperEnv(t, tb.cliNS, []string{"WIRELANE_OVPNCLI_EVENTS=1"}, "connect", "--dev", "wlc0", "--dns", "off", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 20*time.Second)
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.13.0.1")
	cli.interrupt(t)
	out := cli.out.String()
	t.Logf("connect output:\n%s", out)

	// The lines, in this order.
	pos := 0
	for _, want := range []string{
		"ignored or not fully honoured: 3 directives (persist-key, script-security, up); run with -v for details",
		"up/down scripts are not run; such scripts usually set the pushed DNS servers, and --dns=off leaves them unapplied",
		"] resolving nosuch.invalid\n",
		"] resolving nosuch.invalid failed: ",
		"] connecting to 192.168.91.1:1194 (udp)\n",
		"] TLS handshake (the server answered)\n",
		"] TLS done; authenticating (certificate)\n",
		"] pushed options: address 10.13.0.2/24, gateway 10.13.0.1, 1 route, cipher AES-256-GCM, peer-id 0\n",
		"] device wlc0: 10.13.0.2/24, mtu 1500, up\n",
		"] routes added (1): 10.97.0.0/24 via 10.13.0.1\n",
		"] connected: 10.13.0.2/24 on wlc0 via 192.168.91.1:1194 (UDPv4), cipher AES-256-GCM, peer-id 0, in ",
		"tunnel up",
		"] disconnecting (telling the server)",
	} {
		i := strings.Index(out[pos:], want)
		if i < 0 {
			t.Fatalf("no %q after offset %d in the output", want, pos)
		}
		pos += i + len(want)
	}
	// The failed lookup is reported at once, not after the connection.
	m := regexp.MustCompile(`\[ *([0-9.]+)s\] resolving nosuch.invalid failed`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no time on the failed lookup")
	}
	if s, _ := strconv.ParseFloat(m[1], 64); s > 5 {
		t.Fatalf("the failed lookup was reported after %s s", m[1])
	}
	if strings.Count(out, "run with -v for details") != 1 {
		t.Fatal("the warnings summary is not printed exactly once")
	}

	// The events a program gets, in order.
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "event: "); ok {
			got = append(got, s)
		}
	}
	want := []string{"RESOLVE", "RESOLVE failed", "CONNECTING", "WAIT", "AUTH", "AUTH", "GET_CONFIG", "GET_CONFIG",
		"ASSIGN_IP", "ADD_ROUTES", "CONNECTED", "EXITING"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, ","), strings.Join(want, ","))
	}
}

// resolv-retry 5 with no remote that resolves: the lookups are retried,
// each failure reported, and the client gives up after about 5 s.
func TestE2EResolvRetryGivesUp(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Resolve CA", client: "cli1", srvNS: "ors", cliNS: "orc",
		srvIf: "s1", cliIf: "c1", net: "192.168.92"})
	tb.write(t, map[string]string{
		"cli1.ovpn": "client\ndev tun\nremote nosuch.invalid 1194 udp\nremote nosuch2.invalid 1194 udp\nresolv-retry 5\nnobind\n" + tb.clientInline(),
	})
	start := time.Now()
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
	select {
	case <-cli.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("still running after 40 s:\n%s", cli.out.String())
	}
	took := time.Since(start)
	out := cli.out.String()
	t.Logf("connect output (%v):\n%s", took, out)
	if cli.err == nil || !strings.Contains(cli.err.Error(), "exit status 1") {
		t.Fatalf("exit: %v", cli.err)
	}
	m := regexp.MustCompile(`giving up: no remote's host name resolved for 5 s in (\d+) attempts \(resolv-retry 5\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no giving-up message")
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Fatalf("%d attempts, want more than one", n)
	}
	if n := strings.Count(out, "resolving nosuch2.invalid failed"); n < 2 {
		t.Fatalf("the second remote's lookup failed %d times, want more than once", n)
	}
	if !strings.Contains(out, "wirelane ovpn connect: client: giving up") {
		t.Fatal("no final error")
	}
	if took < 4*time.Second {
		t.Fatalf("gave up after %v", took)
	}
}
