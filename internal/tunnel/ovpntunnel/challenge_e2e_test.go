package ovpntunnel

// A dynamic challenge (CRV1) from a real OpenVPN 2.6 server, answered on
// the terminal of `wirelane ovpn connect`:
//
//	ocx (client side)                          ocy (server side)
//	  wirelane connect, stdin a pty              openvpn --server, deferred check.sh
//	  c1 192.168.91.2  ==========veth==========  s1 192.168.91.1
//
// The password is accepted with a challenge; connect shows its text,
// reads the answer and connects with it.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EDynamicChallengeOnTheTerminal(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane CRV1 CA", client: "cli1", srvNS: "ocy", cliNS: "ocx",
		srvIf: "s1", cliIf: "c1", net: "192.168.91", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"check.sh": `#!/bin/sh
user=$(sed -n 1p "$1"); pass=$(sed -n 2p "$1")
if [ "$user" = alice ] && [ "$pass" = s3cret ]; then
	echo 'CRV1:R,E:st1:YWxpY2U=:Enter the code from your token' >"$auth_failed_reason_file"
	echo 0 >"$auth_control_file"
elif [ "$user" = alice ] && [ "$pass" = 'CRV1::st1::424242' ]; then
	echo 1 >"$auth_control_file"
else
	echo 0 >"$auth_control_file"
fi
exit 2
`,
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.91.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.18.0.0 255.255.255.0\n" + serverCreds + "script-security 2\nauth-user-pass-verify " + tb.path("check.sh") + " via-file\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.91.1 1194 udp\nnobind\nremote-cert-tls server\nauth-user-pass\n" + tb.clientInline(),
		"auth.txt":  "alice\ns3cret\n",
	})
	if err := os.Chmod(tb.path("check.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	master, slave := openPTY(t)
	go func() {
		b := make([]byte, 256)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	cli := &helper{name: "connect", cmd: netns.Command(tb.cliNS, os.Args[0], "--dev", "wlc0", "--dns", "off", "--auth-file", tb.path("auth.txt"), tb.path("cli1.ovpn"))}
	cli.cmd.Env = append(os.Environ(), "WIRELANE_OVPNCLI_HELPER=connect", "WIRELANE_OVPNCLI_STATUS_DIR="+StatusDir)
	cli.cmd.Stdin = slave
	cli.start(t, os.Kill)
	cli.waitFor(t, "CHALLENGE: Enter the code from your token ", 30*time.Second) // a deferred verdict may wait for a repeated PUSH_REQUEST (5 s)
	master.WriteString("424242\n")
	cli.waitFor(t, "tunnel up", 20*time.Second)
	if out := cli.out.String(); strings.Contains(out, "424242") || strings.Contains(out, "s3cret") {
		t.Fatalf("connect output shows a secret:\n%s", out)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.18.0.1")
	cli.interrupt(t)
}
