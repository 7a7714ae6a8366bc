package ovpntunnel

// The legacy CBC data channel against real OpenVPN 2.6 in both roles:
//
//	cbc (client side)                            cbs (server side)
//	  wirelane connect  -> openvpn --server        (Wirelane as the client)
//	  openvpn --client  -> wirelane serve          (Wirelane as the server)
//	  c1 192.168.88.2  ==========veth==========  s1 192.168.88.1
//
// Both ends `data-ciphers AES-256-CBC` with auth SHA256 (and AES-128-CBC
// with the default SHA1), tls-crypt, reneg-sec 2; ping and a short
// iperf3 upload and download through the tunnel (renegotiating under
// it), and OpenVPN's log names the CBC cipher and a renegotiation.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func TestE2ECBCInterop(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane CBC CA", client: "cli1", srvNS: "cbs", cliNS: "cbc",
		srvIf: "s1", cliIf: "c1", net: "192.168.88", need: []string{"openvpn", "iperf3", "ping"}})
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*5 + 9)
	}
	tb.write(t, map[string]string{"cli1.crt": string(tb.cliCert), "cli1.key": string(tb.cliKey), "tc.key": string(k.Format())})
	traffic := func(t *testing.T, addr string) {
		netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", addr)
		for _, reverse := range []bool{false, true} {
			r := tb.runIperf(t, addr, 1, reverse)
			if r.Bytes <= 0 {
				t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
			}
			t.Logf("iperf3 reverse=%v: %.0f Mbit/s", reverse, r.Mbps)
		}
	}
	// renegotiated waits until OpenVPN's log shows a key renegotiation (a
	// second TLS handshake: a new key state with new CBC keys), then
	// pings through the tunnel again.
	renegotiated := func(t *testing.T, ovpn *helper, addr string) {
		t.Helper()
		netns.Eventually(t, 8*time.Second, "a renegotiation (reneg-sec 2)", func() error {
			if n := strings.Count(ovpn.out.String(), "Control Channel: TLS"); n < 2 {
				return fmt.Errorf("%d TLS handshake(s) so far", n)
			}
			return nil
		})
		netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", addr)
	}
	for i, tc := range []struct{ cipher, auth string }{{"AES-256-CBC", "SHA256"}, {"AES-128-CBC", ""}} {
		// reneg-sec 2: the keys are renegotiated during the traffic.
		lines := "data-ciphers " + tc.cipher + "\ntls-crypt tc.key\nreneg-sec 2\n"
		if tc.auth != "" {
			lines += "auth " + tc.auth + "\n"
		}
		want := "Data Channel: cipher '" + tc.cipher + "'"
		net := fmt.Sprintf("10.13.%d", 2*i)
		port := 1300 + 2*i
		t.Run("wirelane client, openvpn server, "+tc.cipher, func(t *testing.T) {
			conf, prof := fmt.Sprintf("ovs%d.conf", i), fmt.Sprintf("wlc%d.ovpn", i)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\nlocal 192.168.88.1\ndev ovs%d\ndev-type tun\ntopology subnet\n"+
					"server %s.0 255.255.255.0\n%sdisable-dco\nkeepalive 10 60\nverb 3\n%s", port, i, net, serverCreds, lines),
				prof: fmt.Sprintf("client\ndev tun\nremote 192.168.88.1 %d udp\nnobind\nremote-cert-tls server\n%s%s", port, lines, tb.clientInline()),
			})
			ovs := tb.startOpenVPN(t, tb.srvNS, conf)
			cli := startHelper(t, tb.cliNS, "connect", "--dev", fmt.Sprintf("wlc%d", i), "--mtu", "1400", tb.path(prof))
			cli.waitFor(t, "tunnel up", 15*time.Second)
			if !strings.Contains(cli.out.String(), "cipher "+tc.cipher) || !strings.Contains(cli.out.String(), "legacy non-AEAD cipher") {
				t.Fatalf("connect output lacks the cipher or its warning:\n%s", cli.out.String())
			}
			ovs.waitFor(t, want, 5*time.Second)
			traffic(t, net+".1")
			renegotiated(t, ovs, net+".1")
			cli.interrupt(t)
		})
		net = fmt.Sprintf("10.13.%d", 2*i+1)
		port++
		t.Run("openvpn client, wirelane server, "+tc.cipher, func(t *testing.T) {
			conf, prof := fmt.Sprintf("wls%d.conf", i), fmt.Sprintf("ovc%d.ovpn", i)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\ndev wls%d\ntun-mtu 1400\ntopology subnet\nserver %s.0 255.255.255.0\n%skeepalive 10 60\n%s",
					port, i, net, serverCreds, lines),
				prof: fmt.Sprintf("client\ndev ovc%d\ndev-type tun\nremote 192.168.88.1 %d udp4\nnobind\nremote-cert-tls server\n"+
					"ca ca.crt\ncert cli1.crt\nkey cli1.key\ndisable-dco\nverb 3\n%s", i, port, lines),
			})
			srv := startHelper(t, tb.srvNS, "serve", tb.path(conf))
			srv.waitFor(t, "listening on udp", 10*time.Second)
			ovc := tb.startOpenVPN(t, tb.cliNS, prof)
			srv.waitFor(t, `client "cli1" connected`, 5*time.Second)
			if !strings.Contains(srv.out.String(), tc.cipher) {
				t.Fatalf("serve output lacks %s:\n%s", tc.cipher, srv.out.String())
			}
			ovc.waitFor(t, want, 5*time.Second)
			traffic(t, net+".1")
			renegotiated(t, ovc, net+".1")
			srv.interrupt(t)
		})
	}
}
