package e2e

// The rekey soaks through the real daemons: two wirelaned processes (and,
// for OpenVPN, `wirelane ovpn serve` and `wirelane ovpn connect`) carry
// numbered UDP traffic both ways (internal/testkit/rekeysoak Stream)
// through their tunnel between network namespaces while their sessions are
// renewed again and again. Asserted: every datagram arrives (a loss bound
// of one in a thousand, for the kernel's own drops on a loaded 2-core
// machine; the runs here lose none), every rekey is counted on both sides,
// none of the receivers' counters shows a packet under a key it no longer
// had, the session is never lost, and memory and goroutines stay flat from
// the tenth rekey on (the daemons report their Go runtime's gauges:
// WireGuard's over UAPI, OpenVPN's over the tunnel's control socket).
//
// WireGuard's timers cannot be shortened in the product: these daemons
// are built with -tags wirelane_soaktimers (the wirelaned-soak binary of
// TestMain), which reads WIRELANE_SOAK_REKEY; a release build never has
// the tag (TestSoakBuildIsNotTheRelease). OpenVPN's reneg-sec takes 1 s as
// it is, so its soak runs the ordinary binary.
//
// SOAK_REKEYS sets the number of rekeys (default 20: CI); scripts/soak.sh
// runs 200.

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/sys/gomem"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/rekeysoak"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
)

// lossBound is the most datagrams of sent that a soak may lose: one in a
// thousand, at least one.
func lossBound(sent int64) int64 { return max(1, sent/1000) }

// in returns a function that runs fn with ns as the thread's network
// namespace (for sockets that must live there).
func in(ns *netns.NS) func(func()) error {
	return func(fn func()) error { return testnet.InNamespace(ns.Name, fn) }
}

// daemonCounters reads all of ifname's daemon's engine counters over its
// UAPI socket (uapi.CountersRequest), without their prefix.
func daemonCounters(t *testing.T, ifname string) map[string]uint64 {
	t.Helper()
	c, err := net.DialTimeout("unix", uapi.SocketPath(ifname), 5*time.Second)
	if err != nil {
		t.Fatalf("%s's daemon: %v", ifname, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a fleet's daemon streams 10,000 peers
	if _, err := io.WriteString(c, "get=1\n"+uapi.CountersRequest+"\n\n"); err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		if k == "errno" {
			if v != "0" {
				t.Fatalf("%s's daemon: errno=%s", ifname, v)
			}
			return m
		}
		if name, ok := strings.CutPrefix(k, uapi.CounterPrefix); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			m[name] = n
		}
	}
	t.Fatalf("%s's daemon: answer cut short (%v)", ifname, sc.Err())
	return nil
}

// handshakes is how many handshakes c's device completed, in either role.
func handshakes(c map[string]uint64) uint64 {
	return c["handshakes_completed_initiator"] + c["handshakes_completed_responder"]
}

// goroutineSlack is how many more goroutines a soaked process may have at
// its end than at its tenth rekey: the few a timer or a handshake in
// flight runs at a moment, never one per rekey (a leak of one per rekey
// is 10 after 20 rekeys in CI and 190 in scripts/soak.sh).
const goroutineSlack = 8

// goMem is c's live heap plus goroutine stacks, in bytes.
func goMem(c map[string]uint64) uint64 {
	return c["engine_go_heap_live_bytes"] + c["engine_go_stack_bytes"]
}

// soakDrops are the receive drops that mean a packet was sent under a
// session its receiver no longer had, or lost on the way in.
var soakDrops = []string{"dropped_unknown_index", "dropped_decrypt", "dropped_replay", "dropped_expired",
	"dropped_staged_overflow", "dropped_no_buffer", "dropped_handshake_queue_full", "dropped_no_endpoint"}

// TestDaemonRekeySoakWireGuard: two wirelaned daemons (the soak build,
// WIRELANE_SOAK_REKEY=200ms: a rekey every 200 ms of a session's life,
// sessions rejected after 2 s) in the kernel self-test's topology, UDP
// both ways every millisecond, until SOAK_REKEYS handshakes have completed.
// Every handshake is counted on both sides (each one an initiator
// completed was answered by the other), no datagram is lost beyond
// lossBound, the receivers drop nothing as unknown, expired, replayed or
// undecryptable, and the daemons' heap, stacks and goroutines stay flat
// from the tenth rekey on.
func TestDaemonRekeySoakWireGuard(t *testing.T) {
	need(t, implSoak)
	rekeys := rekeysoak.SoakRekeys(20)
	const rekeyEvery = 200 * time.Millisecond
	ns0, ns1, ns2 := netns.New(t, "wl0s"), netns.New(t, "wl1s"), netns.New(t, "wl2s")
	a := newSide(t, implSoak, ns1, ns0, 10001, "192.168.241.1", "fd00::1")
	b := newSide(t, implSoak, ns2, ns0, 10002, "192.168.241.2", "fd00::2")
	for _, s := range []*side{a, b} {
		s.env = []string{"WIRELANE_SOAK_REKEY=" + rekeyEvery.String()}
		s.up(t)
	}
	a.addPeer(t, b, "127.0.0.1:10002")
	b.addPeer(t, a, "127.0.0.1:10001")
	a.ping(t, b.v4)
	start := handshakes(daemonCounters(t, a.ifname))

	st, err := rekeysoak.StartStream(netip.MustParseAddrPort(a.v4+":7001"), netip.MustParseAddrPort(b.v4+":7002"), in(a.ns), in(b.ns), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mem10, gor10 [2]uint64
	deadline := time.Now().Add(time.Duration(rekeys)*5*rekeyEvery + 10*time.Second)
	done := 0
	for {
		ca := daemonCounters(t, a.ifname)
		done = int(handshakes(ca) - start)
		if done >= 10 && mem10[0] == 0 {
			cb := daemonCounters(t, b.ifname)
			mem10 = [2]uint64{goMem(ca), goMem(cb)}
			gor10 = [2]uint64{ca["engine_go_goroutines"], cb["engine_go_goroutines"]}
		}
		if done >= rekeys || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.Stop()
	// In flight, and any handshake under way, settle (no traffic: no
	// further rekey is due).
	time.Sleep(4 * rekeyEvery)
	ca, cb := daemonCounters(t, a.ifname), daemonCounters(t, b.ifname)
	up, down := st.Counts(rekeysoak.AToB), st.Counts(rekeysoak.BToA)
	t.Logf("%d rekeys: A initiated %d, answered %d (initiations sent %d); B initiated %d, answered %d (sent %d)",
		handshakes(ca)-start, ca["handshakes_completed_initiator"], ca["handshakes_completed_responder"], ca["handshake_initiations_sent"],
		cb["handshakes_completed_initiator"], cb["handshakes_completed_responder"], cb["handshake_initiations_sent"])
	t.Logf("A to B: %v", up)
	t.Logf("B to A: %v", down)
	t.Logf("go heap+stacks from the tenth rekey: A %d -> %d KiB, B %d -> %d KiB; goroutines A %d -> %d, B %d -> %d",
		mem10[0]>>10, goMem(ca)>>10, mem10[1]>>10, goMem(cb)>>10, gor10[0], ca["engine_go_goroutines"], gor10[1], cb["engine_go_goroutines"])
	for i, c := range []map[string]uint64{ca, cb} {
		if g := c["engine_go_goroutines"]; gor10[i] == 0 || g > gor10[i]+goroutineSlack {
			t.Errorf("daemon %c: %d goroutines at the tenth rekey, %d at the end (want at most %d more)", 'A'+i, gor10[i], g, goroutineSlack)
		}
	}

	if done < rekeys {
		t.Fatalf("only %d rekeys before the deadline, want %d", done, rekeys)
	}
	// Each side's completed initiations were each answered by the other
	// (a retried initiation may be answered twice, the response to the
	// first then coming too late): completed <= answered <= sent.
	for _, d := range []struct {
		name       string
		init, resp map[string]uint64
	}{{"A to B", ca, cb}, {"B to A", cb, ca}} {
		done, answered, sent := d.init["handshakes_completed_initiator"], d.resp["handshakes_completed_responder"], d.init["handshake_initiations_sent"]
		if done > answered || answered > sent {
			t.Errorf("%s: %d handshakes completed, %d initiations answered, %d sent: want completed <= answered <= sent", d.name, done, answered, sent)
		}
	}
	for _, c := range []rekeysoak.StreamCounts{up, down} {
		if c.Sent < 1000 {
			t.Errorf("only %d datagrams sent: the traffic did not flow", c.Sent)
		}
		if c.Lost() > lossBound(c.Sent) || c.Duplicates != 0 {
			t.Errorf("%v: more lost than %d, or duplicated", c, lossBound(c.Sent))
		}
	}
	for _, side := range []struct {
		name string
		c    map[string]uint64
	}{{"A", ca}, {"B", cb}} {
		for _, k := range soakDrops {
			if v, ok := side.c[k]; !ok || v != 0 {
				t.Errorf("%s: %s = %d (present: %v), want 0", side.name, k, v, ok)
			}
		}
	}
	if rekeys >= 20 {
		for i, m := range []uint64{goMem(ca), goMem(cb)} {
			if m > mem10[i]+8<<20 {
				t.Errorf("daemon %c: go heap and stacks grew from %d KiB at the tenth rekey to %d KiB", 'A'+i, mem10[i]>>10, m>>10)
			}
		}
	}
}

// TestSoakBuildIsNotTheRelease: the soak daemon is the wirelane_soaktimers
// build and the ordinary one (what scripts/install.sh builds, with the same
// go build and no tags) is not; no release script names the tag.
func TestSoakBuildIsNotTheRelease(t *testing.T) {
	need(t, implSoak)
	for name, want := range map[string]bool{"wirelaned": false, "wirelaned-soak": true} {
		out, err := exec.Command("go", "version", "-m", filepath.Join(binDir, name)).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", name, err, out)
		}
		if got := strings.Contains(string(out), "wirelane_soaktimers"); got != want {
			t.Errorf("%s built with wirelane_soaktimers: %v, want %v\n%s", name, got, want, out)
		}
	}
	for _, f := range []string{"../../../scripts/install.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "wirelane_soaktimers") {
			t.Errorf("%s names the soak build tag", f)
		}
	}
}

// TestDaemonRekeySoakOpenVPN: `wirelane ovpn serve` in one namespace and
// `wirelane ovpn connect` in another, through a relay beside the server
// that reads the key id of every data packet (rekeysoak.Relay), UDP both
// ways every millisecond through the tunnel. First the server renegotiates
// (reneg-sec 1 in its file, 0 in the client's), then the client (the other
// way round), side by side, SOAK_REKEYS/2 renegotiations each (at least
// 10; our ends renegotiate on a one-second tick, so reneg-sec 1 gives one
// every 2 s: 20 s for CI's 10 and 10), each seen
// as a change of key id in both directions. Asserted: the key ids follow
// one another and no data packet goes under an expired key, nothing is
// lost beyond lossBound, the client connects once and never reconnects,
// the two processes' goroutines and stacks (over their control sockets) stay
// flat from the tenth rekey on, and so does their live Go heap (from
// GODEBUG=gctrace=1; checked for runs of 20 or more per side).
func TestDaemonRekeySoakOpenVPN(t *testing.T) {
	need(t, implCLI)
	rekeys := max(10, rekeysoak.SoakRekeys(20)/2)
	for i, driver := range []string{"server", "client"} {
		t.Run(driver, func(t *testing.T) {
			// The two runs share nothing (namespaces, ports, files) and
			// wait mostly on reneg-sec's ticks: side by side they take
			// half the time.
			t.Parallel()
			srvReneg, cliReneg := "1", "0"
			if driver == "client" {
				srvReneg, cliReneg = "0", "1"
			}
			ovpnSoak(t, rekeys, 11961+i, srvReneg, cliReneg)
		})
	}
}

// ovpnSoak runs one OpenVPN soak of TestDaemonRekeySoakOpenVPN with the
// server on port and the two reneg-sec values.
func ovpnSoak(t *testing.T, rekeys, port int, srvReneg, cliReneg string) {
	nsS, nsC := netns.New(t, "wlos"), netns.New(t, "wloc")
	netns.Veth(t, nsS, "eth0", nsC, "eth0")
	netns.Run(t, nsS, "ip", "addr", "add", "10.97.0.1/24", "dev", "eth0")
	netns.Run(t, nsC, "ip", "addr", "add", "10.97.0.2/24", "dev", "eth0")
	pki := testpki.New(t, "wirelane-soak-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "soak-client", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	devS, devC := netns.Unique("wos"), netns.Unique("woc")
	relay, err := rekeysoak.NewRelay(netip.AddrPortFrom(netip.MustParseAddr("10.97.0.1"), uint16(port)), 60*time.Second, in(nsS))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	inline := func(tag, body string) string { return "<" + tag + ">\n" + body + "</" + tag + ">\n" }
	files := map[string]string{
		"server.conf": fmt.Sprintf("port %d\nproto udp\ndev %s\ntopology subnet\nserver 10.96.0.0 255.255.255.0\nkeepalive 1 10\nreneg-sec %s\n", port, devS, srvReneg) +
			inline("ca", string(pki.CAPEM)) + inline("cert", string(srvCert)) + inline("key", string(srvKey)),
		"client.ovpn": fmt.Sprintf("client\ndev tun\nremote %s %d udp\nnobind\nremote-cert-tls server\nreneg-sec %s\n", relay.Addr().Addr(), relay.Addr().Port(), cliReneg) +
			inline("ca", string(pki.CAPEM)) + inline("cert", string(cliCert)) + inline("key", string(cliKey)),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wl := filepath.Join(binDir, "wirelane")
	// gctrace: each collection's live heap on stderr, read at the end
	// (the processes have no counters socket of their own); GOGC=20 for
	// collections often enough to compare (the data path allocates
	// little: one or two in 200 s at the default).
	gctrace := []string{"GODEBUG=gctrace=1", "GOGC=20"}
	var procStart [2]time.Time // server, client
	procStart[0] = time.Now()
	srv := netns.StartEnv(t, nsS, gctrace, wl, "ovpn", "serve", filepath.Join(dir, "server.conf"))
	netns.Eventually(t, 10*time.Second, "the server listening", func() error {
		select {
		case <-srv.Exited():
			t.Fatalf("ovpn serve exited:\n%s", srv.Output())
		default:
		}
		if out, _ := netns.Try(nsS, nil, "ss", "-uln", "sport", "=", fmt.Sprintf(":%d", port)); !strings.Contains(out, strconv.Itoa(port)) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	procStart[1] = time.Now()
	cl := netns.StartEnv(t, nsC, gctrace, wl, "ovpn", "connect", "--dns=off", "--dev", devC, filepath.Join(dir, "client.ovpn"))
	netns.Eventually(t, 30*time.Second, "the client connected", func() error {
		select {
		case <-cl.Exited():
			t.Fatalf("ovpn connect exited:\n%s", cl.Output())
		default:
		}
		if out, _ := netns.Try(nsC, nil, "ip", "-4", "addr", "show", "dev", devC); !strings.Contains(out, "10.96.0.") {
			return fmt.Errorf("no address yet")
		}
		return nil
	})
	out, _ := netns.Try(nsC, nil, "ip", "-4", "-o", "addr", "show", "dev", devC)
	f := strings.Fields(out)
	var cliAddr netip.Addr
	for i := range f {
		if f[i] == "inet" && i+1 < len(f) {
			if p, err := netip.ParsePrefix(f[i+1]); err == nil {
				cliAddr = p.Addr()
			}
		}
	}
	if !cliAddr.IsValid() {
		t.Fatalf("the client's tunnel address: %q", out)
	}
	netns.Run(t, nsC, "ping", "-c", "1", "-W", "5", "10.96.0.1")
	start := relay.Rekeys()

	st, err := rekeysoak.StartStream(netip.MustParseAddrPort("10.96.0.1:7101"), netip.AddrPortFrom(cliAddr, 7102), in(nsS), in(nsC), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rss10 [2]int64
	var rt10 [2]gomem.Stats
	var at10 time.Time
	deadline := time.Now().Add(time.Duration(rekeys)*4*time.Second + 10*time.Second)
	// The baseline: the tenth renegotiation, or half way in a shorter run
	// (CI's 10 per side).
	base := min(10, rekeys/2)
	for relay.Rekeys()-start < rekeys && time.Now().Before(deadline) {
		if relay.Rekeys()-start >= base && rss10[0] == 0 {
			rss10 = [2]int64{rssKiB(srv.Cmd.Process.Pid), rssKiB(cl.Cmd.Process.Pid)}
			rt10 = [2]gomem.Stats{ovpnRuntime(t, srv.Cmd.Process.Pid), ovpnRuntime(t, cl.Cmd.Process.Pid)}
			at10 = time.Now()
		}
		select {
		case <-srv.Exited():
			t.Fatalf("ovpn serve exited:\n%s", srv.Output())
		case <-cl.Exited():
			t.Fatalf("ovpn connect exited:\n%s", cl.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	st.Stop()
	time.Sleep(300 * time.Millisecond)
	rssEnd := [2]int64{rssKiB(srv.Cmd.Process.Pid), rssKiB(cl.Cmd.Process.Pid)}
	rtEnd := [2]gomem.Stats{ovpnRuntime(t, srv.Cmd.Process.Pid), ovpnRuntime(t, cl.Cmd.Process.Pid)}
	done := relay.Rekeys() - start
	up, down := st.Counts(rekeysoak.AToB), st.Counts(rekeysoak.BToA)
	rUp, rDown := relay.Report(rekeysoak.ClientToServer), relay.Report(rekeysoak.ServerToClient)
	t.Logf("client to server on the wire: %v", rUp)
	t.Logf("server to client on the wire: %v", rDown)
	t.Logf("server to client: %v", up)
	t.Logf("client to server: %v", down)

	cl.Cmd.Process.Signal(syscall.SIGINT)
	cliOut, _ := cl.Wait(t, 20*time.Second)
	srv.Cmd.Process.Signal(syscall.SIGINT)
	srvOut, _ := srv.Wait(t, 20*time.Second)
	var heap10, heapEnd [2]int
	var gcs [2]int
	if rss10[0] != 0 {
		for i, out := range []string{srvOut, cliOut} {
			heap10[i], heapEnd[i], gcs[i] = gcHeap(out, at10.Sub(procStart[i]))
		}
		t.Logf("from renegotiation %d: resident memory server %d -> %d KiB, client %d -> %d KiB; live Go heap server %d -> %d MB, client %d -> %d MB (%d and %d collections since)",
			base, rss10[0], rssEnd[0], rss10[1], rssEnd[1], heap10[0], heapEnd[0], heap10[1], heapEnd[1], gcs[0], gcs[1])
	}
	if done < rekeys {
		t.Fatalf("only %d renegotiations before the deadline, want %d\nclient:\n%s\nserver:\n%s", done, rekeys, cliOut, srvOut)
	}
	if n := strings.Count(cliOut, "connected: "); n != 1 {
		t.Errorf("the client connected %d times, want once (a renegotiation must not cost the session):\n%s", n, cliOut)
	}
	for _, rep := range []rekeysoak.Report{rUp, rDown} {
		if rep.Expired != 0 {
			t.Errorf("%d data packets under an expired key: %v", rep.Expired, rep)
		}
	}
	for _, c := range []rekeysoak.StreamCounts{up, down} {
		if c.Sent < 1000 {
			t.Errorf("only %d datagrams sent: the traffic did not flow", c.Sent)
		}
		if c.Lost() > lossBound(c.Sent) || c.Duplicates != 0 {
			t.Errorf("%v: more lost than %d, or duplicated", c, lossBound(c.Sent))
		}
	}
	for i, who := range []string{"server", "client"} {
		t.Logf("%s from renegotiation %d: goroutines %d -> %d, stacks %d -> %d KiB", who, base, rt10[i].Goroutines, rtEnd[i].Goroutines, rt10[i].Stacks>>10, rtEnd[i].Stacks>>10)
		if rt10[i].Goroutines == 0 || rtEnd[i].Goroutines > rt10[i].Goroutines+goroutineSlack {
			t.Errorf("the %s had %d goroutines at renegotiation %d and %d at the end (want at most %d more)", who, rt10[i].Goroutines, base, rtEnd[i].Goroutines, goroutineSlack)
		}
		if rtEnd[i].Stacks > rt10[i].Stacks+1<<20 {
			t.Errorf("the %s's goroutine stacks grew from %d KiB at renegotiation %d to %d KiB", who, rt10[i].Stacks>>10, base, rtEnd[i].Stacks>>10)
		}
	}
	if rekeys >= 20 {
		for i, who := range []string{"server", "client"} {
			// Fewer than two collections since: what was allocated
			// since stayed under one GC goal, which bounds any growth.
			if gcs[i] >= 2 && heapEnd[i] > heap10[i]+2 {
				t.Errorf("the %s's live Go heap grew from %d MB at the tenth rekey to %d MB", who, heap10[i], heapEnd[i])
			}
		}
	}
}

// ovpnRuntime reads the runtime gauges of the OpenVPN tunnel process pid
// (`wirelane ovpn serve` or `connect`) over the control socket its status
// file names.
func ovpnRuntime(t *testing.T, pid int) gomem.Stats {
	t.Helper()
	sts, err := ovpntunnel.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.PID == pid && st.Control != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rt, err := ovpntunnel.RuntimeOf(ctx, st.Control)
			if err != nil {
				t.Fatalf("pid %d's runtime: %v", pid, err)
			}
			return rt
		}
	}
	t.Fatalf("no status file with a control socket for pid %d", pid)
	return gomem.Stats{}
}

// gcLine is a GODEBUG=gctrace=1 line: the time since the start, and the
// heap before, at the end of marking, and live after (MB).
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @([0-9.]+)s .*? (\d+)->(\d+)->(\d+) MB`)

// gcHeap returns the live heap (MB) after the first collection at or
// after since and after the last one, and how many collections there
// were from since on, from a process's gctrace output.
func gcHeap(out string, since time.Duration) (first, last, n int) {
	for _, m := range gcLine.FindAllStringSubmatch(out, -1) {
		at, _ := strconv.ParseFloat(m[1], 64)
		if time.Duration(at*float64(time.Second)) < since {
			continue
		}
		live, _ := strconv.Atoi(m[4])
		if n == 0 {
			first = live
		}
		last = live
		n++
	}
	return first, last, n
}

// rssKiB is process pid's resident set size in KiB (0 when unknown).
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
