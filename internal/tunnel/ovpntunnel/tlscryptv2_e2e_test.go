package ovpntunnel

// `wirelane ovpn connect` against a real OpenVPN 2.6 server with
// tls-crypt-v2 (keys from `wirelane ovpn genkey`'s library calls: a
// Wirelane server key, openvpn's server using it, a Wirelane client key)
// and with peer-fingerprint (self-signed certificates, no CA): ping, a
// short iperf3 each way, and a renegotiation the server asks for
// (reneg-sec 2) with traffic flowing after it.
//
//	oic (client side)                          ois (server side)
//	  wlc0 10.11.0.2  <- wirelane connect        ovs0 10.11.0.1  <- openvpn --server
//	  c1 192.168.NET.2 =========veth=========  s1 192.168.NET.1

import (
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// connectPingIperfReneg brings `wirelane ovpn connect` up with cli.ovpn,
// pings, runs iperf3 both ways and waits for a renegotiation.
func connectPingIperfReneg(t *testing.T, tb *testbed, ovs *helper) {
	t.Helper()
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "-v", tb.path("cli.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) })
	netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.11.0.1")
	for _, reverse := range []bool{false, true} {
		if r := tb.runIperf(t, "10.11.0.1", 1, reverse); r.Bytes <= 0 {
			t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
		}
	}
	ovs.waitFor(t, "TLS: soft reset", 10*time.Second)
	if out := netns.Run(t, tb.cliNS, "ping", "-c", "5", "-i", "0.3", "-W", "2", "10.11.0.1"); !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("loss after renegotiation:\n%s", out)
	}
}

func TestE2EConnectTLSCryptV2(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane V2 CA", client: "v2cli", srvNS: "v2s", cliNS: "v2c",
		srvIf: "s1", cliIf: "c1", net: "192.168.86", need: []string{"openvpn", "iperf3", "ping"}})
	sk, err := wrap.GenerateV2ServerKey()
	if err != nil {
		t.Fatal(err)
	}
	md, _ := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte("v2cli")))
	ck, err := sk.NewClientKey(md)
	if err != nil {
		t.Fatal(err)
	}
	tb.write(t, map[string]string{
		"v2server.key": string(sk.Format()),
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.86.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.11.0.0 255.255.255.0\n" + serverCreds + "tls-crypt-v2 v2server.key force-cookie\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nreneg-sec 2\nverb 3\n",
		"cli.ovpn": "client\ndev tun\nremote 192.168.86.1 1194 udp\nnobind\nremote-cert-tls server\n" +
			tb.clientInline() + "<tls-crypt-v2>\n" + string(ck.Format()) + "</tls-crypt-v2>\n",
	})
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
	connectPingIperfReneg(t, tb, ovs)
	ovs.waitFor(t, "Control Channel: using tls-crypt-v2 key", time.Second)
}

func TestE2EConnectPeerFingerprint(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "unused", client: "fpcli", srvNS: "fps", cliNS: "fpc",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"openvpn", "iperf3", "ping"}})
	srvCert, srvKey, srvFP := testpki.SelfSigned(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey, cliFP := testpki.SelfSigned(t, "fpcli", x509.ExtKeyUsageClientAuth)
	tb.write(t, map[string]string{
		"fp.crt": string(srvCert), "fp.key": string(srvKey),
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.87.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.11.0.0 255.255.255.0\ncert fp.crt\nkey fp.key\ndh none\n<peer-fingerprint>\n" + cliFP + "\n</peer-fingerprint>\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nreneg-sec 2\nverb 3\n",
		"cli.ovpn": "client\ndev tun\nremote 192.168.87.1 1194 udp\nnobind\nremote-cert-tls server\npeer-fingerprint " + srvFP + "\n" +
			"<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n",
	})
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
	connectPingIperfReneg(t, tb, ovs)
}
