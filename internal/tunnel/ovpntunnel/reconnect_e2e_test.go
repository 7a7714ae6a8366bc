package ovpntunnel

// `wirelane ovpn connect` survives what OpenVPN's client survives, against
// a real OpenVPN 2.6 server:
//
//	orc (client side)                          ors (server side)
//	  wlc0 10.12.0.2  <- wirelane connect        ovs0 10.12.0.1  <- openvpn --server
//	  c1 192.168.85.2  ==========veth==========  s1 192.168.85.1
//
// Over UDP the server is killed without a word (the client notices by
// ping-restart) and started again; then stopped with SIGTERM, which sends
// RESTART (explicit-exit-notify), and started again. Over TCP both end the
// connection (a transport error). Each time the client reconnects on its
// own, the TUN device stays (same interface index) and pings cross the
// tunnel again.

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectReconnectsToOpenVPNServer(t *testing.T) {
	t.Run("udp", func(t *testing.T) {
		testReconnect(t, "udp4", "explicit-exit-notify 1\n", "udp", "nothing received within ping-restart", "server asked for a restart")
	})
	t.Run("tcp", func(t *testing.T) {
		testReconnect(t, "tcp-server", "", "tcp", "client: transport", "client: transport")
	})
}

// testReconnect runs the scenario with the server's proto and extra lines
// and the client's proto; whyKill and whyTerm are the client's reasons for
// restarting after SIGKILL and SIGTERM of the server.
func testReconnect(t *testing.T, srvProto, srvExtra, cliProto, whyKill, whyTerm string) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Reconnect CA", client: "cli1", srvNS: "ors", cliNS: "orc",
		srvIf: "s1", cliIf: "c1", net: "192.168.85", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto " + srvProto + "\nlocal 192.168.85.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.12.0.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"keepalive 1 3\n" + srvExtra + "verb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.85.1 1194 " + cliProto + "\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
	})
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) }) // runs before the server stops
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.12.0.1")
	index := func() string {
		out := netns.Run(t, tb.cliNS, "ip", "-o", "link", "show", "wlc0")
		return strings.SplitN(out, ":", 2)[0]
	}
	idx := index()

	for round, c := range []struct {
		stop func()
		why  string // the client's reason for the restart
	}{
		{func() { ovs.cmd.Process.Kill() }, whyKill},
		{func() { ovs.cmd.Process.Signal(syscall.SIGTERM) }, whyTerm},
	} {
		c.stop()
		select {
		case <-ovs.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the openvpn server did not stop", round+1)
		}
		need := 1 // the reason's count in the output: once more than before
		if round == 1 && whyKill == whyTerm {
			need = 2
		}
		netns.Eventually(t, 15*time.Second, "client noticed: "+c.why, func() error {
			if strings.Count(cli.out.String(), c.why) < need {
				return os.ErrDeadlineExceeded
			}
			return nil
		})
		ovs = tb.startOpenVPN(t, tb.srvNS, "server.conf")
		netns.Eventually(t, 30*time.Second, "client reconnected", func() error {
			if n := strings.Count(cli.out.String(), "tunnel up again"); n < round+1 {
				select {
				case <-cli.done:
					t.Fatalf("connect exited (%v):\n%s", cli.err, cli.out.String())
				default:
				}
				return os.ErrDeadlineExceeded
			}
			return nil
		})
		netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.12.0.1")
		if got := index(); got != idx {
			t.Fatalf("round %d: wlc0 is a new device (index %s, was %s)", round+1, got, idx)
		}
	}
	t.Logf("connect output:\n%s", cli.out.String())
}
