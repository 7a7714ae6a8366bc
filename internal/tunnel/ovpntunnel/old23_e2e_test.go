package ovpntunnel

// "A real pre-2.4 server" (#19), emulated: Debian has no OpenVPN 2.3 any
// more (bookworm ships 2.6.14 only), so the peer is OpenVPN 2.6.14 told to
// behave as 2.3 did, and the Wirelane side reads a file as 2.3-era
// providers shipped it. This is an emulation, not a 2.3 binary: 2.6 in
// `compat-mode 2.3.0` still speaks its own TLS and may still answer a
// client's cipher list (NCP) where a real 2.3 server would push no cipher;
// the no-push path itself is covered by ovpn/client's TestPushedCipher.
//
//	o23c (client side)                            o23s (server side)
//	  wirelane connect  -> openvpn (as 2.3)        (Wirelane as the client)
//	  openvpn (as 2.3)  -> wirelane serve          (Wirelane as the server)
//	  c1 192.168.95.2  ==========veth==========  s1 192.168.95.1
//
// The 2.3 server: compat-mode 2.3.0, one cipher (data-ciphers and cipher
// AES-256-CBC, no AEAD to negotiate), auth SHA1, comp-lzo yes with
// allow-compression yes (a 2.3 server with comp-lzo compressed what
// compresses), tls-auth with key direction 0, topology net30 (2.3's
// default: the client gets a /30 and a route to the server's address).
// The 2.3-era client file as providers ship it for 2.5/2.6 clients:
// cipher AES-256-CBC, auth SHA1, comp-lzo (no allow-compression: asym,
// as OpenVPN 2.6 takes it, so what the server compresses is
// decompressed), tls-auth inline with key-direction 1,
// persist-key/persist-tun, data-ciphers-fallback AES-256-CBC (for a
// server that negotiates nothing, as a real 2.3 one) and the
// data-ciphers line OpenVPN 2.6 needs for this emulation (fix23: 2.6 in
// compat-mode still negotiates, and refuses a client that offers no CBC
// cipher with "no shared cipher", OpenVPN 2.6.14's own client included);
// then the same file with compat-mode 2.3.0 instead of that line.
// The opposite role: OpenVPN 2.6 as a 2.3 client (compat-mode 2.3.0, the
// same cipher lines, comp-lzo yes with allow-compression yes, and
// data-ciphers AES-256-CBC: 2.6 in compat-mode still offers its AEAD
// ciphers, which a 2.3 client never had) against Wirelane's server with
// comp-lzo yes (asym: it decompresses), which has topology subnet (net30
// is not supported by Wirelane's server; 2.3 clients know subnet). Ping,
// pings of 1200 zeros (which the OpenVPN end sends compressed) and a short
// iperf3 each way, and the CBC cipher named by both ends.

import (
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func TestE2EPre24ServerEmulated(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Old CA", client: "cli1", srvNS: "o23s", cliNS: "o23c",
		srvIf: "s1", cliIf: "c1", net: "192.168.95", need: []string{"openvpn", "iperf3", "ping"}})
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*3 + 1)
	}
	tb.write(t, map[string]string{"cli1.crt": string(tb.cliCert), "cli1.key": string(tb.cliKey), "ta.key": string(k.Format())})
	traffic := func(t *testing.T, addr string) {
		netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", addr)
		tb.pingZeros(t, addr)
		for _, reverse := range []bool{false, true} {
			if r := tb.runIperf(t, addr, 1, reverse); r.Bytes <= 0 {
				t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
			}
		}
	}
	const old = "cipher AES-256-CBC\nauth SHA1\n"
	// fix23 is the one line a 2.3-era file needs with OpenVPN 2.6 as
	// with Wirelane: `cipher` is no longer negotiated, and OpenVPN 2.6's
	// own advice is to add the server's cipher to data-ciphers. With it
	// the file works against a real 2.3 server too (no cipher pushed:
	// the server's options string names AES-256-CBC, which is listed).
	const fix23 = "data-ciphers AES-256-GCM:AES-128-GCM:AES-256-CBC\ndata-ciphers-fallback AES-256-CBC\n"
	const want = "Data Channel: cipher 'AES-256-CBC'"
	t.Run("wirelane client, openvpn server as 2.3", func(t *testing.T) {
		tb.write(t, map[string]string{
			"old23.conf": "port 1523\nproto udp\nlocal 192.168.95.1\ndev o23s0\ndev-type tun\ntopology net30\n" +
				"server 10.23.0.0 255.255.255.0\n" + serverCreds + "tls-auth ta.key 0\ncompat-mode 2.3.0\n" +
				"data-ciphers AES-256-CBC\n" + old + "comp-lzo yes\nallow-compression yes\ndisable-dco\nkeepalive 10 60\nverb 4\n",
			// As a 2.3-era provider file: no data-ciphers, comp-lzo, the
			// tls-auth key inline with key-direction.
			"old23.ovpn": "client\ndev tun\nproto udp\nremote 192.168.95.1 1523\nresolv-retry infinite\nnobind\npersist-key\npersist-tun\n" +
				"remote-cert-tls server\n" + old + fix23 + "comp-lzo\nkey-direction 1\nverb 3\n" + tb.clientInline() +
				"<tls-auth>\n" + string(k.Format()) + "</tls-auth>\n",
		})
		ovs := tb.startOpenVPN(t, tb.srvNS, "old23.conf")
		cli := startHelper(t, tb.cliNS, "connect", "--dev", "o23c0", "--mtu", "1400", "--dns", "off", tb.path("old23.ovpn"))
		cli.waitFor(t, "tunnel up", 15*time.Second)
		if out := cli.out.String(); !strings.Contains(out, "AES-256-CBC") {
			t.Fatalf("connect output does not name the CBC cipher:\n%s", out)
		}
		ovs.waitFor(t, want, 5*time.Second)
		// net30: the server is 10.23.0.1, reached through the pushed route.
		traffic(t, "10.23.0.1")
		cli.interrupt(t)
		checkNoCompressedDrops(t, cli)
		// The same file with compat-mode 2.3.0 in place of fix23, as
		// OpenVPN 2.6 reads it: `cipher` joins data-ciphers (and is the
		// fallback), so the emulated server finds it offered.
		tb.write(t, map[string]string{"old23c.ovpn": "client\ndev tun\nproto udp\nremote 192.168.95.1 1523\nnobind\n" +
			"remote-cert-tls server\n" + old + "compat-mode 2.3.0\ncomp-lzo\nkey-direction 1\n" + tb.clientInline() +
			"<tls-auth>\n" + string(k.Format()) + "</tls-auth>\n"})
		cc := startHelper(t, tb.cliNS, "connect", "--dev", "o23c1", "--mtu", "1400", "--dns", "off", tb.path("old23c.ovpn"))
		cc.waitFor(t, "tunnel up", 15*time.Second)
		netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.23.0.1")
		tb.pingZeros(t, "10.23.0.1")
		cc.interrupt(t)
		checkNoCompressedDrops(t, cc)
	})
	t.Run("openvpn client as 2.3, wirelane server", func(t *testing.T) {
		tb.write(t, map[string]string{
			"wls23.conf": "port 1524\nproto udp4\ndev o23w0\ntun-mtu 1400\ntopology subnet\nserver 10.23.1.0 255.255.255.0\n" +
				serverCreds + "tls-auth ta.key 0\ndata-ciphers AES-256-GCM:AES-256-CBC\n" + old + "comp-lzo yes\nkeepalive 10 60\n",
			"ovc23.ovpn": "client\ndev o23o0\ndev-type tun\nproto udp\nremote 192.168.95.1 1524\nnobind\nremote-cert-tls server\n" +
				"ca ca.crt\ncert cli1.crt\nkey cli1.key\ntls-auth ta.key 1\ncompat-mode 2.3.0\ndata-ciphers AES-256-CBC\n" + old + "comp-lzo yes\nallow-compression yes\ndisable-dco\nverb 4\n",
		})
		srv := startHelper(t, tb.srvNS, "serve", tb.path("wls23.conf"))
		srv.waitFor(t, "listening on udp", 10*time.Second)
		ovc := tb.startOpenVPN(t, tb.cliNS, "ovc23.ovpn")
		srv.waitFor(t, `client "cli1" connected`, 5*time.Second)
		ovc.waitFor(t, want, 5*time.Second)
		if out := srv.out.String(); !strings.Contains(out, "AES-256-CBC") {
			t.Fatalf("serve output does not name the CBC cipher:\n%s", out)
		}
		traffic(t, "10.23.1.1")
		srv.interrupt(t)
		checkNoCompressedDrops(t, srv)
	})
}
