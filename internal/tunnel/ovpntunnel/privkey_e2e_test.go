package ovpntunnel

// Encrypted private keys and PKCS#12 files against real OpenVPN 2.6 in
// both roles:
//
//	pkc (client side)                            pks (server side)
//	  wirelane connect  -> openvpn --server        (Wirelane as the client)
//	  openvpn --client  -> wirelane serve          (Wirelane as the server)
//	  c1 192.168.89.2  ==========veth==========  s1 192.168.89.1
//
// Wirelane's end reads its key as an encrypted PKCS#8 key (PBES2, AES-256)
// with askpass FILE, then as PKCS#12 files made by the real `openssl
// pkcs12 -export` (with the CA inside): 3DES; OpenSSL 3's default (PBES2
// with PBKDF2-HMAC-SHA256 and AES-256-CBC, MAC SHA-256) with a passphrase
// and with an empty one; -legacy (RC2 and 3DES, MAC SHA-1) with a
// passphrase and with an empty one. OpenVPN's end reads the same formats
// with the same passphrase file (with OpenSSL's legacy provider loaded for
// -legacy, which OpenSSL 3 needs for RC2). Ping and a short iperf3 each
// way.

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EEncryptedKeysInterop(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Keys CA", client: "cli1", srvNS: "pks", cliNS: "pkc",
		srvIf: "s1", cliIf: "c1", net: "192.168.89", need: []string{"openvpn", "openssl", "iperf3", "ping"}})
	tb.write(t, map[string]string{"cli1.crt": string(tb.cliCert), "cli1.key": string(tb.cliKey), "pass.txt": "s3cret\n"})
	openssl := func(args ...string) {
		t.Helper()
		cmd := exec.Command("openssl", args...)
		cmd.Dir = tb.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v: %s", args, err, out)
		}
	}
	for _, who := range []string{"server", "cli1"} {
		cert, key := who+".crt", who+".key"
		openssl("pkcs8", "-topk8", "-in", key, "-v2", "aes-256-cbc", "-v2prf", "hmacWithSHA256", "-passout", "file:pass.txt", "-out", who+"-enc.key")
		openssl("pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", "ca.crt", "-keypbe", "PBE-SHA1-3DES", "-certpbe", "PBE-SHA1-3DES",
			"-macalg", "sha1", "-passout", "file:pass.txt", "-out", who+".p12")
		base := []string{"pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", "ca.crt"}
		openssl(append(base, "-passout", "file:pass.txt", "-out", who+"-aes.p12")...)
		openssl(append(base, "-passout", "pass:", "-out", who+"-aes-nopass.p12")...)
		openssl(append(base, "-legacy", "-passout", "file:pass.txt", "-out", who+"-legacy.p12")...)
		openssl(append(base, "-legacy", "-passout", "pass:", "-out", who+"-legacy-nopass.p12")...)
	}
	// The files are what OpenSSL 3 writes by default and with -legacy.
	for f, want := range map[string]string{"cli1-aes.p12": "PBES2, PBKDF2, AES-256-CBC", "cli1-legacy.p12": "pbeWithSHA1And40BitRC2-CBC"} {
		cmd := exec.Command("openssl", "pkcs12", "-in", f, "-info", "-noout", "-passin", "file:pass.txt", "-legacy")
		cmd.Dir = tb.dir
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("openssl pkcs12 -info %s: %v: %s (want %q)", f, err, out, want)
		}
	}
	creds := map[string]func(who string) string{
		"encrypted PKCS#8": func(who string) string {
			return "ca ca.crt\ncert " + who + ".crt\nkey " + who + "-enc.key\naskpass pass.txt\n"
		},
		"PKCS#12":                   func(who string) string { return "pkcs12 " + who + ".p12\naskpass pass.txt\n" },
		"PKCS#12 OpenSSL 3 default": func(who string) string { return "pkcs12 " + who + "-aes.p12\naskpass pass.txt\n" },
		"PKCS#12 OpenSSL 3 default, no passphrase": func(who string) string { return "pkcs12 " + who + "-aes-nopass.p12\n" },
		"PKCS#12 -legacy":                          func(who string) string { return "pkcs12 " + who + "-legacy.p12\naskpass pass.txt\n" },
		"PKCS#12 -legacy, no passphrase":           func(who string) string { return "pkcs12 " + who + "-legacy-nopass.p12\n" },
	}
	// OpenVPN's own end needs OpenSSL's legacy provider for RC2.
	ovpnCred := func(name, who string) string {
		if strings.Contains(name, "-legacy") {
			return creds[name](who) + "providers legacy default\n"
		}
		return creds[name](who)
	}
	traffic := func(t *testing.T, addr string) {
		netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", addr)
		for _, reverse := range []bool{false, true} {
			if r := tb.runIperf(t, addr, 1, reverse); r.Bytes <= 0 {
				t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
			}
		}
	}
	i := 0
	for _, name := range []string{"encrypted PKCS#8", "PKCS#12", "PKCS#12 OpenSSL 3 default", "PKCS#12 OpenSSL 3 default, no passphrase",
		"PKCS#12 -legacy", "PKCS#12 -legacy, no passphrase"} {
		cred := creds[name]
		net, port := fmt.Sprintf("10.14.%d", 2*i), 1400+2*i
		n := i
		t.Run("wirelane client, openvpn server, "+name, func(t *testing.T) {
			conf, prof := fmt.Sprintf("ovs%d.conf", n), fmt.Sprintf("wlc%d.ovpn", n)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\nlocal 192.168.89.1\ndev ovs%d\ndev-type tun\ntopology subnet\n"+
					"server %s.0 255.255.255.0\n%sdh none\ndisable-dco\nkeepalive 10 60\nverb 3\n", port, n, net, ovpnCred(name, "server")),
				prof: fmt.Sprintf("client\ndev tun\nremote 192.168.89.1 %d udp\nnobind\nremote-cert-tls server\n%s", port, cred("cli1")),
			})
			tb.startOpenVPN(t, tb.srvNS, conf)
			cli := startHelper(t, tb.cliNS, "connect", "--dev", fmt.Sprintf("wlc%d", n), "--mtu", "1400", "--dns", "off", tb.path(prof))
			cli.waitFor(t, "tunnel up", 15*time.Second)
			traffic(t, net+".1")
			cli.interrupt(t)
		})
		net, port = fmt.Sprintf("10.14.%d", 2*i+1), port+1
		t.Run("openvpn client, wirelane server, "+name, func(t *testing.T) {
			conf, prof := fmt.Sprintf("wls%d.conf", n), fmt.Sprintf("ovc%d.ovpn", n)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\ndev wls%d\ntun-mtu 1400\ntopology subnet\nserver %s.0 255.255.255.0\n%skeepalive 10 60\n",
					port, n, net, cred("server")),
				prof: fmt.Sprintf("client\ndev ovc%d\ndev-type tun\nremote 192.168.89.1 %d udp4\nnobind\nremote-cert-tls server\n%sdisable-dco\nverb 3\n",
					n, port, ovpnCred(name, "cli1")),
			})
			srv := startHelper(t, tb.srvNS, "serve", tb.path(conf))
			srv.waitFor(t, "listening on udp", 10*time.Second)
			tb.startOpenVPN(t, tb.cliNS, prof)
			srv.waitFor(t, `client "cli1" connected`, 5*time.Second)
			traffic(t, net+".1")
			srv.interrupt(t)
		})
		i++
	}
}
