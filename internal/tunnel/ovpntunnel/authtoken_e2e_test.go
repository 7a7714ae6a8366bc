package ovpntunnel

// auth-token through `wirelane ovpn connect` and a real OpenVPN 2.6
// server with auth-gen-token (its secret in a file, so tokens survive the
// server's restart) and a password script that logs every call:
//
//	otc (client side)                          ots (server side)
//	  wirelane connect --auth-file, auth-nocache   openvpn --server, check.sh
//	  c1 192.168.87.2  ==========veth==========  s1 192.168.87.1
//
// The client connects with the password, then the server restarts
// (SIGTERM, explicit-exit-notify): the reconnect authenticates with the
// token alone (the password was forgotten, the auth file now holds a
// wrong one, and the script runs only once).

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectReconnectsWithAuthToken(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Token CA", client: "cli1", srvNS: "ots", cliNS: "otc",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"openvpn", "iperf3", "ping"}})
	if out, err := exec.Command("openvpn", "--genkey", "auth-token", tb.path("token.key")).CombinedOutput(); err != nil {
		t.Fatalf("openvpn --genkey auth-token: %v: %s", err, out)
	}
	calls := tb.path("calls.log")
	tb.write(t, map[string]string{
		"check.sh": "#!/bin/sh\necho \"$(sed -n 1p \"$1\")\" >>" + calls + "\n" +
			"[ \"$(sed -n 1p \"$1\")\" = alice ] && [ \"$(sed -n 2p \"$1\")\" = s3cret ]\n",
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.87.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.16.0.0 255.255.255.0\n" + serverCreds + "script-security 2\nauth-user-pass-verify " + tb.path("check.sh") + " via-file\n" +
			"auth-gen-token 0 120\nauth-gen-token-secret token.key\nexplicit-exit-notify 1\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1194 udp\nnobind\nremote-cert-tls server\nauth-user-pass\nauth-nocache\n" + tb.clientInline(),
		"auth.txt":  "alice\ns3cret\n",
	})
	if err := os.Chmod(tb.path("check.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", "--dns", "off", "--auth-file", tb.path("auth.txt"), tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) })
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.16.0.1")
	tb.write(t, map[string]string{"auth.txt": "alice\nnot-the-password\n"})

	ovs.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ovs.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the openvpn server did not stop")
	}
	ovs = tb.startOpenVPN(t, tb.srvNS, "server.conf")
	netns.Eventually(t, 30*time.Second, "client reconnected", func() error {
		if !strings.Contains(cli.out.String(), "tunnel up again") {
			select {
			case <-cli.done:
				t.Fatalf("connect exited (%v):\n%s", cli.err, cli.out.String())
			default:
			}
			return os.ErrDeadlineExceeded
		}
		return nil
	})
	out := cli.out.String()
	if !strings.Contains(out, "authenticating as alice (auth-token)") || strings.Contains(out, "s3cret") {
		t.Fatalf("connect output:\n%s", out)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.16.0.1")
	for _, reverse := range []bool{false, true} {
		if r := tb.runIperf(t, "10.16.0.1", 1, reverse); r.Bytes <= 0 {
			t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
		}
	}
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("the password script ran %d times, want once: the reconnect must use the token", n)
	}
	ovs.waitFor(t, "auth-token", time.Second)
}
