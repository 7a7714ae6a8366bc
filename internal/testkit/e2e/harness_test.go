package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// impl is one userspace WireGuard implementation under test.
type impl struct {
	name string   // binary name in binDir
	args []string // subcommand words before the interface name
	// racyReturn: the command may return before its daemon is ready (the
	// reference daemonizes before its child has set up), so the harness
	// waits for the socket before touching the interface.
	racyReturn bool
}

var (
	implWirelane = impl{name: "wirelaned"}
	implWGGo     = impl{name: "wireguard-go", racyReturn: true}
	// implCLI is the same daemon reached through the CLI's hidden
	// subcommand: its detached copy must come back through `daemon`.
	implCLI = impl{name: "wirelane", args: []string{"daemon"}}
	// implRef is Wirelane with the device's conventional locked send path:
	// wirelaned built with -tags wirelane_refmode.
	implRef = impl{name: "wirelaned-ref"}
	// implSoak is Wirelane whose timers WIRELANE_SOAK_REKEY shortens:
	// wirelaned built with -tags wirelane_soaktimers (device/soaktimers.go).
	implSoak = impl{name: "wirelaned-soak"}
)

func (im impl) path() string { return filepath.Join(binDir, im.name) }

// command returns the daemon command line for ifname (foreground adds -f).
func (im impl) command(ifname string, foreground bool) []string {
	c := append([]string{im.path()}, im.args...)
	if foreground {
		c = append(c, "-f")
	}
	return append(c, ifname)
}

// need skips the test unless it can run with im: root, the tools, and a
// built binary.
func need(t *testing.T, im impl, tools ...string) {
	t.Helper()
	netns.Need(t, append([]string{"wg", "ping"}, tools...)...)
	if err := buildErr[im.name]; err != nil {
		if im.name == implCLI.name {
			t.Skipf("the wirelane CLI did not build: %v", err)
		}
		t.Fatalf("%v", err)
	}
}

// startDaemon runs im's daemon for ifname inside ns (whose network stack
// then holds the daemon's UDP sockets) and returns once the daemon
// command has returned (and, for racy implementations, once the socket
// answers). The daemon is stopped, and its socket removed, at cleanup.
func startDaemon(t *testing.T, im impl, ns *netns.NS, ifname string, env ...string) {
	t.Helper()
	out, err := netns.Try(ns, env, im.command(ifname, false)...)
	if err != nil {
		t.Fatalf("start %s %s: %v\n%s", im.name, ifname, err, out)
	}
	t.Cleanup(func() { stopDaemon(t, ns, ifname) })
	if im.racyReturn {
		netns.Eventually(t, 5*time.Second, im.name+" socket for "+ifname, func() error {
			_, err := netns.Try(nil, nil, "wg", "show", ifname)
			return err
		})
	}
}

// daemonPid finds the daemon serving ifname among the processes of ns; it
// returns 0 when there is none.
func daemonPid(ns *netns.NS, ifname string) int {
	out, _ := netns.Command(nil, "ip", "netns", "pids", ns.Name).Output()
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) >= 2 && args[len(args)-1] == ifname {
			return pid
		}
	}
	return 0
}

// stopDaemon ends ifname's daemon (SIGTERM, then SIGKILL) and removes a
// leftover socket file.
func stopDaemon(t *testing.T, ns *netns.NS, ifname string) {
	if pid := daemonPid(ns, ifname); pid != 0 {
		syscall.Kill(pid, syscall.SIGTERM)
		if !waitGone(pid, 3*time.Second) {
			t.Logf("cleanup: daemon %d for %s ignored SIGTERM; killing it", pid, ifname)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	os.Remove(uapi.SocketPath(ifname))
}

// waitGone reports whether process pid ends within d. The daemons are not
// our children (they re-parent to init), so a zombie counts as gone.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// side is one end of a tunnel.
type side struct {
	im     impl
	ns     *netns.NS // where the interface lives
	home   *netns.NS // where the daemon and its UDP sockets live
	ifname string
	key    wgtypes.Key
	port   int
	v4, v6 string // tunnel addresses
	// foreground runs the daemon with -f and LOG_LEVEL=verbose under
	// proc, whose output the test may inspect after the daemon exits.
	foreground bool
	proc       *netns.Proc
	env        []string // extra environment of the daemon (KEY=VALUE)
}

func (s *side) pub() string { return s.key.PublicKey().String() }

// wg runs wg(8) against this side's interface (through its socket; wg
// finds userspace sockets from any namespace).
func (s *side) wg(t *testing.T, args ...string) string {
	t.Helper()
	return netns.Run(t, nil, append([]string{"wg"}, args...)...)
}

// run runs a command in the namespace that holds the interface.
func (s *side) run(t *testing.T, args ...string) string {
	t.Helper()
	return netns.Run(t, s.ns, args...)
}

// pair is two daemons with a tunnel between them.
type pair struct {
	ns0  *netns.NS
	a, b *side
}

// newSide creates the keys and names of one side.
func newSide(t *testing.T, im impl, ns, home *netns.NS, port int, v4, v6 string) *side {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return &side{im: im, ns: ns, home: home, ifname: netns.Unique("wl"), key: k, port: port, v4: v4, v6: v6}
}

// up starts the side's daemon in its home namespace and moves the
// interface to its own namespace straight away, then sets the key, port
// and addresses.
func (s *side) up(t *testing.T) {
	t.Helper()
	if s.foreground {
		s.proc = netns.StartEnv(t, s.home, append([]string{"LOG_LEVEL=verbose"}, s.env...), s.im.command(s.ifname, true)...)
		t.Cleanup(func() { stopDaemon(t, s.home, s.ifname) })
		netns.Eventually(t, 5*time.Second, s.im.name+" -f socket for "+s.ifname, func() error {
			_, err := netns.Try(nil, nil, "wg", "show", s.ifname)
			return err
		})
	} else {
		startDaemon(t, s.im, s.home, s.ifname, s.env...)
	}
	if s.ns != s.home {
		netns.Run(t, s.home, "ip", "link", "set", s.ifname, "netns", s.ns.Name)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(s.key.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.wg(t, "set", s.ifname, "private-key", keyFile, "listen-port", strconv.Itoa(s.port))
	s.run(t, "ip", "addr", "add", s.v4+"/24", "dev", s.ifname)
	s.run(t, "ip", "addr", "add", s.v6+"/64", "dev", s.ifname, "nodad")
	s.run(t, "ip", "link", "set", s.ifname, "up")
}

// addPeer makes o a peer of s, reachable at endpoint (empty = none).
func (s *side) addPeer(t *testing.T, o *side, endpoint string, extra ...string) {
	t.Helper()
	args := []string{"set", s.ifname, "peer", o.pub(), "allowed-ips", o.v4 + "/32," + o.v6 + "/128"}
	if endpoint != "" {
		args = append(args, "endpoint", endpoint)
	}
	s.wg(t, append(args, extra...)...)
}

// newPair builds the kernel self-test topology with a on im1 in ns1 and
// b on im2 in ns2, each knowing the other's endpoint on loopback.
func newPair(t *testing.T, im1, im2 impl) *pair {
	t.Helper()
	ns0, ns1, ns2 := netns.New(t, "wl0n"), netns.New(t, "wl1n"), netns.New(t, "wl2n")
	p := &pair{
		ns0: ns0,
		a:   newSide(t, im1, ns1, ns0, 10001, "192.168.241.1", "fd00::1"),
		b:   newSide(t, im2, ns2, ns0, 10002, "192.168.241.2", "fd00::2"),
	}
	p.a.up(t)
	p.b.up(t)
	p.a.addPeer(t, p.b, "127.0.0.1:10002")
	p.b.addPeer(t, p.a, "[::1]:10001")
	return p
}

// ping sends count echo requests from s to addr and fails the test unless
// all are answered.
func (s *side) ping(t *testing.T, addr string, extra ...string) {
	t.Helper()
	args := append([]string{"ping", "-c", "1", "-W", "5"}, extra...)
	out, err := netns.Try(s.ns, nil, append(args, addr)...)
	if err != nil {
		state, _ := netns.Try(nil, nil, "wg", "show", s.ifname)
		t.Fatalf("%v\n%s\nwg show %s:\n%s", err, out, s.ifname, state)
	}
}

// pingFails asserts that a single ping from s to addr goes unanswered.
func (s *side) pingFails(t *testing.T, addr string, extra ...string) {
	t.Helper()
	args := append([]string{"ping", "-c", "1", "-W", "1"}, extra...)
	if out, err := netns.Try(s.ns, nil, append(args, addr)...); err == nil {
		t.Fatalf("ping %s from %s was answered, want it dropped:\n%s", addr, s.ifname, out)
	}
}

// endpointOf returns the endpoint s has recorded for peer o.
func (s *side) endpointOf(t *testing.T, o *side) string {
	t.Helper()
	for _, line := range strings.Split(s.wg(t, "show", s.ifname, "endpoints"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == o.pub() {
			return f[1]
		}
	}
	t.Fatalf("wg show %s endpoints has no line for the peer", s.ifname)
	return ""
}

// iperfResult is the part of iperf3's JSON report the tests check.
type iperfResult struct {
	End struct {
		SumReceived struct {
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		Sum struct {
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Packets       float64 `json:"packets"`
			LostPercent   float64 `json:"lost_percent"`
		} `json:"sum"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperfPort numbers the iperf3 servers, so that one never waits for the
// previous one's port.
var iperfPort atomic.Uint32

// iperf runs an iperf3 server on server's address v4 and a client on
// client for two seconds; udp selects a UDP test. It returns the
// receiver's throughput in bit/s and fails unless traffic flowed.
func iperf(t *testing.T, client, server *side, addr string, udp, reverse bool) float64 {
	t.Helper()
	port := strconv.Itoa(int(5200 + iperfPort.Add(1)))
	netns.Start(t, server.ns, "iperf3", "-s", "-1", "-B", addr, "-p", port)
	args := []string{"iperf3", "-c", addr, "-p", port, "-t", "2", "-J"}
	if udp {
		args = append(args, "-u", "-b", "100M", "-l", "1200")
	}
	if reverse {
		args = append(args, "-R")
	}
	var res iperfResult
	netns.Eventually(t, 5*time.Second, "iperf3 client run", func() error {
		out, err := netns.Try(client.ns, nil, args...)
		res = iperfResult{}
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
			return fmt.Errorf("%v: %s", jerr, out)
		}
		if res.Error != "" {
			if strings.Contains(res.Error, "unable to connect") {
				return errors.New(res.Error) // server not listening yet
			}
			t.Fatalf("iperf3: %s", res.Error)
		}
		if err != nil {
			t.Fatalf("iperf3: %v\n%s", err, out)
		}
		return nil
	})
	if udp {
		s := res.End.Sum
		t.Logf("iperf3 UDP %s -> %s: %.0f Mbit/s sent, %.0f packets, %.1f%% lost",
			client.ifname, server.ifname, s.BitsPerSecond/1e6, s.Packets, s.LostPercent)
		// Loss depends on the machine's load; this only proves UDP flows.
		if s.Packets < 1000 || s.LostPercent > 75 {
			t.Fatalf("UDP iperf3 carried too little: %.0f packets, %.1f%% lost", s.Packets, s.LostPercent)
		}
		return s.BitsPerSecond * (100 - s.LostPercent) / 100
	}
	r := res.End.SumReceived
	t.Logf("iperf3 TCP %s -> %s (reverse=%v): %.0f Mbit/s", client.ifname, server.ifname, reverse, r.BitsPerSecond/1e6)
	if r.Bytes < 1e6 {
		t.Fatalf("TCP iperf3 carried only %.0f bytes", r.Bytes)
	}
	return r.BitsPerSecond
}
