package ovpntunnel

// Wirelane's client against a real OpenVPN 2.6 server, as a user runs it:
//
//	oic (client side)                          ois (server side)
//	  wlc0 10.11.0.2  <- wirelane connect        ovs0 10.11.0.1  <- openvpn --server
//	  c1 192.168.84.2  ==========veth==========  s1 192.168.84.1
//
// UDP, AES-256-GCM, tls-crypt. The test pings the server's tunnel address
// from the client namespace, then runs iperf3 TCP upload and download (-R)
// across the tunnel and checks that both moved data.

import (
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func TestE2EConnectToOpenVPNServerIperf(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Interop CA", client: "cli1", srvNS: "ois", cliNS: "oic",
		srvIf: "s1", cliIf: "c1", net: "192.168.84", need: []string{"openvpn", "iperf3", "ping"}})
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*11 + 3)
	}
	tb.write(t, map[string]string{
		"ta.key": string(k.Format()),
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.84.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.11.0.0 255.255.255.0\n" + serverCreds + "tls-crypt ta.key\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.84.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline() + "<tls-crypt>\n" + string(k.Format()) + "</tls-crypt>\n",
	})
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")

	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	if want := "pushed options: address 10.11.0.2/24, gateway 10.11.0.1, cipher AES-256-GCM"; !strings.Contains(cli.out.String(), want) {
		t.Fatalf("connect output lacks %q:\n%s", want, cli.out.String())
	}
	t.Cleanup(func() { cli.interrupt(t) }) // runs before the server stops
	// The server's view: it verified cli1 and agreed on the data cipher.
	ovs.waitFor(t, "cli1/192.168.84.2", 5*time.Second)
	ovs.waitFor(t, "Data Channel: cipher 'AES-256-GCM'", 5*time.Second)

	netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.11.0.1")

	var rates [2]float64
	for i, reverse := range []bool{false, true} {
		r := tb.runIperf(t, "10.11.0.1", 2, reverse)
		if r.Mbps <= 0 || r.Bytes <= 0 {
			t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
		}
		rates[i] = r.Mbps
	}
	t.Logf("iperf3 TCP through wirelane connect -> openvpn 2.6 (AES-256-GCM, tls-crypt): upload %.0f Mbit/s, download %.0f Mbit/s", rates[0], rates[1])
}
