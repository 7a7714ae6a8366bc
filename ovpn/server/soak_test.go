package server

// The OpenVPN rekey soak: our client and our server renegotiate many
// times under traffic, with the renegotiation timers shortened by
// Options.Timers (ovpn/internal/testtimers: only packages under ovpn/ can
// make one, no configuration reaches it). A relay between them reads the
// key id of every data packet (internal/testkit/rekeysoak). Asserted: no
// packet sent under an expired key (one that is neither the sender's
// current key nor the lame duck within the transition window), key ids
// in sequence, every echo answered, the session never lost or replaced,
// no data packet dropped, goroutines and heap flat from the tenth rekey.
//
// SOAK_REKEYS sets the number of renegotiations (default 20; CI);
// scripts/soak.sh runs 200.

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/rekeysoak"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/internal/testtimers"
)

// soakRekeys is SOAK_REKEYS, or def.
func soakRekeys(def int) int {
	if v, err := strconv.Atoi(os.Getenv("SOAK_REKEYS")); err == nil && v > 0 {
		return v
	}
	return def
}

func TestRekeySoak(t *testing.T) {
	rekeys := soakRekeys(20)
	const (
		tick  = 20 * time.Millisecond
		reneg = 150 * time.Millisecond
		// window is the transition window, both sides: how long a
		// lame duck keeps decrypting after this side moved to the new
		// key. The peer may still send under it until it has the ack of
		// its last key-exchange message, so the window must cover that
		// wait on a loaded machine (a shorter one loses packets, as a
		// too-short tran-window does in OpenVPN).
		window = time.Second
	)
	for _, tc := range []struct {
		name           string
		server, client *testtimers.Timers
		// dropEvery: every n-th control datagram lost (0: none), so that
		// key-exchange acks come late and a renegotiation overlaps the
		// peer's activation of the last one; each loss waits out the
		// retransmission timer, so fewer rekeys.
		dropEvery, rekeys int
		// window: with lost control datagrams the server may learn of
		// the client's new key only from a retransmission (2 s, then
		// 4 s), so the lame duck must outlive that.
		window time.Duration
	}{
		{"server renegotiates", testtimers.New(tick, reneg), testtimers.New(tick, 0), 0, rekeys, window},
		{"client renegotiates", testtimers.New(tick, 0), testtimers.New(tick, reneg), 0, rekeys, window},
		{"client renegotiates, lossy control", testtimers.New(tick, 0), testtimers.New(tick, reneg), 23, max(rekeys/4, 4), 10 * time.Second},
	} {
		rekeys, window := tc.rekeys, tc.window
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.serverConfig(UDP)
			s := startServer(t, cfg, Options{TransitionWindow: window, Timers: tc.server})
			echoResponder(s)
			relay, err := rekeysoak.NewRelay(s.Addr(), window, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer relay.Close()
			ccfg := f.clientConfig(t, s, "soak", "reneg-sec 0\n")
			ccfg.Remotes[0].Port = relay.Addr().Port()
			c := dialClient(t, ccfg, client.Options{TransitionWindow: window, Timers: tc.client})
			relay.SetDropControlEvery(tc.dropEvery)
			traffic := rekeysoak.StartTraffic(c, c.Pushed().Local.Addr(), s.TunnelAddress().Addr(), 2*time.Millisecond)

			var goroutines10 int
			var heap10 uint64
			deadline := time.Now().Add(time.Duration(rekeys) * 4 * time.Second)
			for relay.Rekeys() < rekeys && time.Now().Before(deadline) && c.Err() == nil {
				if relay.Rekeys() >= 10 && goroutines10 == 0 {
					goroutines10, heap10 = runtime.NumGoroutine(), heapAfterGC()
				}
				time.Sleep(5 * time.Millisecond)
			}
			traffic.Stop()
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if sent, answered := traffic.Counts(); answered >= sent {
					break // the last echo replies are in
				}
			}
			goroutinesEnd, heapEnd := runtime.NumGoroutine(), heapAfterGC()
			sent, answered := traffic.Counts()
			up, down := relay.Report(rekeysoak.ClientToServer), relay.Report(rekeysoak.ServerToClient)
			t.Logf("client to server: %v", up)
			t.Logf("server to client: %v", down)
			t.Logf("%d control datagrams dropped by the relay", relay.DroppedControl())
			t.Logf("%d echo requests, %d answered; goroutines %d -> %d, heap %d -> %d KiB from the tenth rekey",
				sent, answered, goroutines10, goroutinesEnd, heap10>>10, heapEnd>>10)
			if err := c.Err(); err != nil {
				t.Fatalf("session lost: %v", err)
			}
			if got := relay.Rekeys(); got < rekeys {
				t.Fatalf("only %d rekeys in %v", got, time.Duration(rekeys)*4*time.Second)
			}
			for _, rep := range []rekeysoak.Report{up, down} {
				if rep.Expired != 0 {
					t.Errorf("%d data packets sent under an expired key", rep.Expired)
				}
			}
			if answered < sent {
				st := s.Stats()
				t.Errorf("%d of %d echo requests unanswered (server: bad data %d, rx queue full %d, no route %d; client: %+v)",
					sent-answered, sent, st.BadData.Load(), st.RxFull.Load(), st.NoRoute.Load(), c.Stats())
			}
			if st := c.Stats(); st.DroppedData != 0 {
				t.Errorf("client dropped %d data packets", st.DroppedData)
			}
			if n := s.Stats().BadData.Load(); n != 0 {
				t.Errorf("server dropped %d data packets", n)
			}
			if cl := s.Clients(); len(cl) != 1 || s.peerCount() != 1 {
				t.Errorf("server holds %d sessions, lists %d clients; want the one session", s.peerCount(), len(cl))
			}
			if goroutines10 == 0 {
				return // fewer than ten rekeys: nothing to compare with
			}
			if goroutinesEnd > goroutines10+4 {
				t.Errorf("goroutines grew from %d at the tenth rekey to %d", goroutines10, goroutinesEnd)
			}
			if heapEnd > heap10+8<<20 {
				t.Errorf("heap grew from %d KiB at the tenth rekey to %d KiB", heap10>>10, heapEnd>>10)
			}
		})
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
