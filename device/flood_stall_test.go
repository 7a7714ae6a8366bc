package device

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// The responder of TestHandshakeUnderFloodAfterStall runs in a process of its own
// (this test binary again) so that it can be stopped whole, as a host that
// gives it no CPU would: the kernel goes on queuing the flood in its
// socket's buffer, and nothing of the responder runs meanwhile.
const stallChildEnv = "WIRELANE_STALL_RESPONDER"

// stallResponder is the child's side: a device on the production bind
// with the private key and peers given in the environment. It prints its
// port, then answers each line read on stdin with its counters, and exits
// at the end of stdin. WIRELANE_STALL_NOSTALE=1 keeps receive timestamps
// off, so that it works through every datagram as before the stale drop.
func stallResponder() {
	keyHex, peers := os.Getenv(stallChildEnv), strings.Fields(os.Getenv("WIRELANE_STALL_PEERS"))
	var key noise.PrivateKey
	if b, err := hex.DecodeString(keyHex); err != nil || len(b) != len(key) {
		fmt.Println("error bad key")
		os.Exit(1)
	} else {
		copy(key[:], b)
	}
	d := NewDevice(memtun.New("stall", 1420), conn.NewStdBind(), Options{})
	if err := d.Up(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cfg := &Config{PrivateKey: &key}
	for i, p := range peers {
		var pub noise.PublicKey
		b, _ := hex.DecodeString(p)
		copy(pub[:], b)
		cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: pub, AllowedIPs: prefixes(fmt.Sprintf("10.9.1.%d/32", i+1))})
	}
	if err := d.Configure(cfg); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if os.Getenv("WIRELANE_STALL_NOSTALE") == "1" {
		d.stamps.mu.Lock()
		d.stamps.failed = true // never turned on: no stale drops
		d.stamps.mu.Unlock()
	}
	fmt.Printf("port %d\n", d.boundPort.Load())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		dr := d.Drops()
		fmt.Printf("loaded %v stamps %v stale %d cookies %d queuefull %d ratelimited %d\n",
			d.underLoad(), d.stamps.on.Load(), dr.HandshakeStale, dr.CookieRepliesSent, dr.HandshakeQueueFull, dr.RateLimited)
	}
	d.Close()
	os.Exit(0)
}

// stallChild is the parent's handle on a responder process.
type stallChild struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	port uint16
}

func startStallResponder(t *testing.T, key noise.PrivateKey, peers []noise.PublicKey, noStale bool) *stallChild {
	t.Helper()
	var hexPeers []string
	for _, p := range peers {
		hexPeers = append(hexPeers, hex.EncodeToString(p[:]))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHandshakeUnderFloodAfterStall$")
	cmd.Env = append(os.Environ(), stallChildEnv+"="+hex.EncodeToString(key[:]), "WIRELANE_STALL_PEERS="+strings.Join(hexPeers, " "))
	if noStale {
		cmd.Env = append(cmd.Env, "WIRELANE_STALL_NOSTALE=1")
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	must(t, err)
	outR, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	c := &stallChild{cmd: cmd, in: in, out: bufio.NewScanner(outR)}
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := c.line(t)
	p, err := strconv.ParseUint(strings.TrimPrefix(line, "port "), 10, 16)
	if err != nil {
		t.Fatalf("responder process: %q", line)
	}
	c.port = uint16(p)
	return c
}

func (c *stallChild) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("responder process ended: %v", c.out.Err())
	}
	return c.out.Text()
}

// stats asks the responder for its counters (it must be running).
func (c *stallChild) stats(t *testing.T) string {
	t.Helper()
	fmt.Fprintln(c.in, "stats")
	return c.line(t)
}

func (c *stallChild) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	must(t, syscall.Kill(c.cmd.Process.Pid, s))
}

// After the stall the responder stays starved: it runs starveRun out of
// every starveRun+starveStop (a quarter of a CPU at most, less on a
// shared machine).
const starveRun, starveStop = 5 * time.Millisecond, 15 * time.Millisecond

// stallBacklog is how much of the responder's socket buffer the stalled
// rounds fill with flood (bytes of the kernel's accounting, about 830 per
// 148-byte initiation): three quarters of what it holds (SO_RCVBUFFORCE
// doubled by the kernel as root; rmem_max otherwise), so that the
// legitimate initiation still finds room behind it.
func stallBacklog() uint64 {
	size := uint64(2 * (7 << 20))
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
			if m, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				size = 2 * min(m, 7<<20)
			}
		}
	}
	return size * 3 / 4
}

// TestHandshakeUnderFloodAfterStall reproduces a responder starved of CPU
// under a handshake flood, over real UDP: while it is flooded (and under
// load), its process is stopped; the flood (four times faster meanwhile,
// to keep the test short) fills three quarters of its socket's buffer and
// then pauses until all of that is older than StaleHandshakeAge; a fresh
// legitimate initiator (retry every 250 ms, answers the cookie at once)
// sends its initiation behind the backlog; the responder is let go, still
// starved (it runs a quarter of the time), and the flood goes on (20,000
// a second). The handshake must complete within 500 ms of the responder's
// resumption, in every round: the responder drops the stale backlog
// unread and answers the fresh initiation. Without the stale drop
// (WIRELANE_STALL_NOSTALE, which FLOOD_STALL_COMPARE=1 also runs and
// logs) it first works through the whole backlog, mac1 and a cookie reply
// each, while the flood keeps coming, and every answer it sends is older
// than the initiator's retry.
func TestHandshakeUnderFloodAfterStall(t *testing.T) {
	if os.Getenv(stallChildEnv) != "" {
		stallResponder()
		return
	}
	if testing.Short() || acceptanceRace {
		t.Skip("stops a flooded responder process for a few seconds; under the race detector the latency says nothing")
	}
	variants := []bool{false}
	if os.Getenv("FLOOD_STALL_COMPARE") == "1" {
		variants = append(variants, true)
	}
	rate := 20000
	if v, err := strconv.Atoi(os.Getenv("FLOOD_RATE")); err == nil && v > 0 {
		rate = v
	}
	const rounds = 3
	for _, noStale := range variants {
		name := map[bool]string{false: "stale drop", true: "no stale drop"}[noStale]
		key := mustKey(t)
		keys := make([]noise.PrivateKey, rounds)
		var pubs []noise.PublicKey
		for i := range keys {
			keys[i] = mustKey(t)
			pubs = append(pubs, keys[i].PublicKey())
		}
		child := startStallResponder(t, key, pubs, noStale)
		ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), child.port)
		flood := floodInitiations(t, key.PublicKey(), 1024)
		var worst time.Duration
		failed := 0
		for r := 0; r < rounds; r++ {
			fl := startUDPFlood(t, ep, flood, rate)
			for deadline := time.Now().Add(10 * time.Second); ; {
				st := child.stats(t)
				if strings.HasPrefix(st, "loaded true stamps "+strconv.FormatBool(!noStale)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the responder never got under load: %s", name, st)
				}
				time.Sleep(20 * time.Millisecond)
			}
			before := child.stats(t)
			drops0, _ := udpSocketDrops(child.port)
			// The stall: the flood fills the buffer, then pauses until
			// what it queued is stale.
			child.signal(t, syscall.SIGSTOP)
			stopped := time.Now()
			fl.halt()
			fl = startUDPFlood(t, ep, flood, 4*rate) // the fill, faster
			var queued uint64
			for time.Since(stopped) < 5*time.Second {
				if _, queued = udpSocketDrops(child.port); queued >= stallBacklog() {
					break
				}
				time.Sleep(time.Millisecond)
			}
			fl.halt()
			filled := time.Since(stopped)
			time.Sleep(StaleHandshakeAge + 50*time.Millisecond)
			// The legitimate initiator, behind the backlog; the flood
			// resumes with the responder.
			res, res2 := make(chan handshakeTrace, 1), make(chan struct{})
			go func() { res <- tracedInitiator(keys[r], key.PublicKey(), ep, 5*time.Second) }()
			time.Sleep(5 * time.Millisecond)
			fl = startUDPFlood(t, ep, flood, rate)
			resumed := time.Now()
			child.signal(t, syscall.SIGCONT)
			// Still starved: a quarter of the time running.
			starved := make(chan struct{})
			go func() {
				defer close(starved)
				for {
					time.Sleep(starveRun)
					syscall.Kill(child.cmd.Process.Pid, syscall.SIGSTOP)
					time.Sleep(starveStop)
					syscall.Kill(child.cmd.Process.Pid, syscall.SIGCONT)
					select {
					case <-res2:
						return
					default:
					}
				}
			}()
			h := <-res
			el := time.Since(resumed)
			close(res2)
			<-starved
			after := child.stats(t)
			fl.halt()
			drops1, _ := udpSocketDrops(child.port)
			t.Logf("%s, round %d: backlog %d KiB queued in %v of stall; handshake %v after the responder resumed (%v since the first initiation, err %v): %s; kernel drops %d; responder before: %s; after: %s",
				name, r, queued>>10, filled.Round(time.Millisecond), el.Round(100*time.Microsecond), h.elapsed.Round(100*time.Microsecond), h.err, h.trace, drops1-drops0, before, after)
			worst = max(worst, el)
			if h.err != nil || el >= 500*time.Millisecond {
				failed++
				if !noStale {
					t.Errorf("%s, round %d: the legitimate handshake took %v after the responder resumed (err %v), the requirement is under 500 ms: %s", name, r, el, h.err, h.trace)
				}
			}
			time.Sleep(100 * time.Millisecond) // past the per-source rate limit
		}
		t.Logf("%s: %d of %d rounds at or over 500 ms; slowest %v", name, failed, rounds, worst)
	}
}
