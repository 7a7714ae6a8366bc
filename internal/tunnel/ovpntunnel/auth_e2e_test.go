package ovpntunnel

// auth-user-pass and static-challenge typed on a terminal, checked by a
// real OpenVPN 2.6 server's auth-user-pass-verify script:
//
//	oac (client side)                          oas (server side)
//	  wirelane connect, stdin a pty              openvpn --server, check.sh
//	  c1 192.168.93.2  ==========veth==========  s1 192.168.93.1

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EPromptedCredentialsReachOpenVPN(t *testing.T) {
	cli, ovs, master := startPromptedConnect(t, "auth-user-pass\n", "192.168.93", "oas", "oac")
	cli.waitFor(t, "Enter Auth Username: ", 10*time.Second)
	master.WriteString("alice\n")
	cli.waitFor(t, "Enter Auth Password: ", 5*time.Second)
	master.WriteString("s3cret\n")
	cli.waitFor(t, "CHALLENGE: Enter OTP ", 5*time.Second)
	master.WriteString("424242\n")
	cli.waitFor(t, "tunnel up", 20*time.Second)
	if out := cli.out.String(); !strings.Contains(out, "TLS done; authenticating as alice") || strings.Contains(out, "s3cret") {
		t.Fatalf("connect output:\n%s", out)
	}
	ovs.waitFor(t, "TLS: Username/Password authentication succeeded for username 'alice'", 5*time.Second)
	cli.interrupt(t)
}

// TestE2EUsernameOnlyFileAsksThePassword: `auth-user-pass FILE` whose
// file holds the username only (#18) asks the password alone on the
// terminal, as OpenVPN 2.6 does ("Enter Auth Password:", never the
// username), and the real server accepts the file's username with the
// typed password.
func TestE2EUsernameOnlyFileAsksThePassword(t *testing.T) {
	cli, ovs, master := startPromptedConnect(t, "auth-user-pass user.txt\n", "192.168.94", "oau", "oad")
	cli.waitFor(t, "Enter Auth Password: ", 10*time.Second)
	master.WriteString("s3cret\n")
	cli.waitFor(t, "CHALLENGE: Enter OTP ", 5*time.Second)
	master.WriteString("424242\n")
	cli.waitFor(t, "tunnel up", 20*time.Second)
	if out := cli.out.String(); strings.Contains(out, "Enter Auth Username") || !strings.Contains(out, "TLS done; authenticating as alice") {
		t.Fatalf("connect output:\n%s", out)
	}
	ovs.waitFor(t, "TLS: Username/Password authentication succeeded for username 'alice'", 5*time.Second)
	cli.interrupt(t)
}

// startPromptedConnect starts a real OpenVPN 2.6 server whose
// auth-user-pass-verify script accepts alice with password s3cret and
// static-challenge response 424242, and `connect` on a pseudo-terminal
// (returned: its master end) with a file of these auth lines and the
// static challenge "Enter OTP"; user.txt beside it holds alice alone.
func startPromptedConnect(t *testing.T, auth, subnet, srvNS, cliNS string) (cli, ovs *helper, master *os.File) {
	t.Helper()
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Auth CA", client: "cli1", srvNS: srvNS, cliNS: cliNS,
		srvIf: "s1", cliIf: "c1", net: subnet, need: []string{"openvpn"}})
	// OpenVPN hands the script a file with the username and the password
	// line; with static-challenge the latter is SCRV1:b64(password):b64(response).
	tb.write(t, map[string]string{
		"check.sh": "#!/bin/sh\n[ \"$(sed -n 1p \"$1\")\" = alice ] && [ \"$(sed -n 2p \"$1\")\" = SCRV1:czNjcmV0:NDI0MjQy ]\n",
		"server.conf": "port 1194\nproto udp4\nlocal " + subnet + ".1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.15.0.0 255.255.255.0\n" + serverCreds + "script-security 2\nauth-user-pass-verify " + tb.path("check.sh") + " via-file\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"user.txt": "alice\n",
		"cli1.ovpn": "client\ndev tun\nremote " + subnet + ".1 1194 udp\nnobind\nremote-cert-tls server\n" + auth +
			"static-challenge \"Enter OTP\" 0\n" + tb.clientInline(),
	})
	if err := os.Chmod(tb.path("check.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	ovs = tb.startOpenVPN(t, tb.srvNS, "server.conf")
	master, slave := openPTY(t)
	go func() { // drain what the terminal echoes
		b := make([]byte, 256)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	cli = &helper{name: "connect", cmd: netns.Command(tb.cliNS, os.Args[0], "--dev", "wlc0", "--dns", "off", tb.path("cli1.ovpn"))}
	cli.cmd.Env = append(os.Environ(), "WIRELANE_OVPNCLI_HELPER=connect", "WIRELANE_OVPNCLI_STATUS_DIR="+StatusDir)
	cli.cmd.Stdin = slave
	cli.start(t, os.Kill)
	return cli, ovs, master
}
