package ovpntunnel

// user nobody / group nogroup in both a Wirelane server and a Wirelane
// client, as provider and admin files write them:
//
//	pdc (client side)                             pds (server side)
//	  wlpc0 10.21.0.2  <- wirelane connect          wlps0 10.21.0.1  <- wirelane serve
//	  c1 192.168.87.2  ===========veth===========   s1 192.168.87.1
//
// Both processes, once up, are nobody:nogroup on every thread with
// CAP_NET_ADMIN alone; pings cross; the status files keep being
// rewritten. The server is stopped with SIGTERM (its device and its
// route go) and a second one, pushing another route, started: the
// client, long since nobody, reconnects and replaces its routes. SIGTERM
// then takes the client's device and routes away, and its status file
// no longer names the tunnel.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/sys/privdrop"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EUserGroupDropPrivileges(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Privdrop CA", client: "cli1", srvNS: "pds", cliNS: "pdc",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"ping"}})
	if _, err := privdrop.Lookup("nobody", "nogroup"); err != nil {
		t.Skipf("no user nobody or group nogroup here: %v", err)
	}
	server := func(pushed string) string {
		return "port 1194\nproto udp\ndev wlps0\ntopology subnet\nserver 10.21.0.0 255.255.255.0\n" + serverCreds +
			"push \"route " + pushed + " 255.255.255.0\"\nroute 10.77.0.0 255.255.255.0\nkeepalive 1 5\n" +
			"user nobody\ngroup nogroup\npersist-key\npersist-tun\n"
	}
	tb.write(t, map[string]string{
		"server1.conf": server("10.97.0.0"),
		"server2.conf": server("10.96.0.0"),
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1194 udp\nnobind\nremote-cert-tls server\n" +
			"user nobody\ngroup nogroup\npersist-key\npersist-tun\n" + tb.clientInline(),
	})
	netns.Run(t, tb.srvNS, "ip", "addr", "add", "10.97.0.1/32", "dev", "lo")
	netns.Run(t, tb.srvNS, "ip", "addr", "add", "10.96.0.1/32", "dev", "lo")

	srv := startHelper(t, tb.srvNS, "serve", tb.path("server1.conf"))
	srv.waitFor(t, "privileges dropped to user nobody (65534), group nogroup (65534), keeping CAP_NET_ADMIN", 10*time.Second)
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlpc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	if !strings.Contains(cli.out.String(), "privileges dropped to user nobody (65534), group nogroup (65534), keeping CAP_NET_ADMIN") {
		t.Fatalf("connect output:\n%s", cli.out.String())
	}
	for _, h := range []*helper{srv, cli} {
		checkDropped(t, h.name, h.cmd.Process.Pid)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.21.0.1")
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.97.0.1")
	if r := netns.Run(t, tb.srvNS, "ip", "-4", "route", "show", "dev", "wlps0"); !strings.Contains(r, "10.77.0.0/24") {
		t.Fatalf("server routes:\n%s", r)
	}
	// Counters only a rewrite after the drop can carry.
	netns.Eventually(t, 5*time.Second, "status files rewritten after the drop", func() error {
		tunnels, err := Status()
		if err != nil {
			return err
		}
		if len(tunnels) != 2 || tunnels[0].RxBytes == 0 || len(tunnels[1].Clients) != 1 || tunnels[1].RxBytes == 0 {
			return fmt.Errorf("got %+v", tunnels)
		}
		return nil
	})

	// The server's exit, as nobody: its device and route go, its status
	// file is emptied.
	stopWith(t, srv, syscall.SIGTERM)
	if out := netns.Run(t, tb.srvNS, "ip", "-o", "link", "show"); strings.Contains(out, "wlps0") {
		t.Fatalf("server device left:\n%s", out)
	}
	if out := netns.Run(t, tb.srvNS, "ip", "-4", "route", "show"); strings.Contains(out, "10.77.0.0") {
		t.Fatalf("server route left:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(StatusDir, "ovpn-"+strconv.Itoa(srv.cmd.Process.Pid)+".json")); err == nil && len(b) > 0 {
		t.Fatalf("the server's status file still holds:\n%s", b)
	}

	srv2 := startHelper(t, tb.srvNS, "serve", tb.path("server2.conf"))
	netns.Eventually(t, 20*time.Second, "client reconnected", func() error {
		if !strings.Contains(cli.out.String(), "tunnel up again") {
			return os.ErrDeadlineExceeded
		}
		return nil
	})
	checkDropped(t, "serve (second)", srv2.cmd.Process.Pid)
	r := netns.Run(t, tb.cliNS, "ip", "-4", "route", "show", "dev", "wlpc0")
	if !strings.Contains(r, "10.96.0.0/24 via 10.21.0.1") || strings.Contains(r, "10.97.0.0") {
		t.Fatalf("client routes after the reconnect (want 10.96.0.0/24 only):\n%s", r)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.96.0.1")

	stopWith(t, cli, syscall.SIGTERM)
	if out := netns.Run(t, tb.cliNS, "ip", "-o", "link", "show"); strings.Contains(out, "wlpc0") {
		t.Fatalf("client device left:\n%s", out)
	}
	if out := netns.Run(t, tb.cliNS, "ip", "-4", "route", "show"); strings.Contains(out, "10.96.0.0") || strings.Contains(out, "10.21.0.") {
		t.Fatalf("client routes left:\n%s", out)
	}
	tunnels, err := Status()
	if err != nil || len(tunnels) != 1 || tunnels[0].Kind != KindServer {
		t.Fatalf("status after the client's exit: %+v, %v", tunnels, err)
	}
	stopWith(t, srv2, syscall.SIGTERM)
}

// checkDropped asserts from /proc that every thread of pid is
// nobody:nogroup with CAP_NET_ADMIN alone.
func checkDropped(t *testing.T, name string, pid int) {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("%s: no threads: %v", name, err)
	}
	want := map[string]string{"Uid:": "65534 65534 65534 65534", "Gid:": "65534 65534 65534 65534", "Groups:": "65534",
		"CapEff:": "0000000000001000", "CapPrm:": "0000000000001000", "CapAmb:": "0000000000000000"}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that ended
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.SplitN(l, ":", 2)
			if w, ok := want[f[0]+":"]; ok && len(f) == 2 && strings.Join(strings.Fields(f[1]), " ") != w {
				t.Errorf("%s (pid %d) %s: %s, want %s", name, pid, p, l, w)
			}
		}
	}
}

// stopWith sends sig and waits for a clean exit.
func stopWith(t *testing.T, h *helper, sig os.Signal) {
	t.Helper()
	h.cmd.Process.Signal(sig)
	select {
	case <-h.done:
		if h.err != nil {
			t.Fatalf("%s: exit after %v: %v\n%s", h.name, sig, h.err, h.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still running 10 s after %v:\n%s", h.name, sig, h.out.String())
	}
}
