package client

// The rekey soak against OpenVPN 2.6: its server renegotiates every
// second (reneg-sec 1, the smallest it takes) under traffic with this
// package's client, whose own timers tick faster (Options.Timers,
// ovpn/internal/testtimers) so that it drops lame-duck keys on time. A
// relay in the server's namespace reads the key id of every data packet
// (internal/testkit/rekeysoak). Asserted as in ovpn/server TestRekeySoak: no
// packet sent under an expired key in either direction (OpenVPN's own
// included), key ids in sequence, the session never lost, goroutines and
// heap of the client flat from the tenth rekey.
//
// SOAK_OPENVPN_REKEYS sets the number of renegotiations (default 12;
// scripts/soak.sh runs 200).

import (
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/rekeysoak"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/internal/testtimers"
)

func TestE2ERekeySoak(t *testing.T) {
	rekeys := 12
	if v, err := strconv.Atoi(os.Getenv("SOAK_OPENVPN_REKEYS")); err == nil && v > 0 {
		rekeys = v
	}
	const window = 2 * time.Second // tran-window on both sides
	e := newEnv(t)
	srv := e.startServer(t, false, "reneg-sec 1", "tran-window 2")
	relay, err := rekeysoak.NewRelay(netip.MustParseAddrPort("127.0.0.1:11940"), window,
		func(fn func()) error { return testnet.InNamespace(srv.ns, fn) })
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	cfg := e.clientConfig(t, srv, "reneg-sec 0\n")
	cfg.Remotes[0].Port = relay.Addr().Port()
	opts := srv.options(t)
	opts.TransitionWindow = window
	opts.Timers = testtimers.New(50*time.Millisecond, 0)
	s := dial(t, cfg, opts)
	defer s.Close()
	push := s.Pushed()
	traffic := rekeysoak.StartTraffic(s, push.Local.Addr(), push.Remote, 5*time.Millisecond)

	var goroutines10 int
	var heap10 uint64
	deadline := time.Now().Add(time.Duration(rekeys) * 4 * time.Second)
	for relay.Rekeys() < rekeys && time.Now().Before(deadline) && s.Err() == nil {
		if relay.Rekeys() >= 10 && goroutines10 == 0 {
			goroutines10, heap10 = runtime.NumGoroutine(), heapAfterGC()
		}
		time.Sleep(10 * time.Millisecond)
	}
	traffic.Stop()
	time.Sleep(500 * time.Millisecond) // the last replies
	goroutinesEnd, heapEnd := runtime.NumGoroutine(), heapAfterGC()
	sent, answered := traffic.Counts()
	up, down := relay.Report(rekeysoak.ClientToServer), relay.Report(rekeysoak.ServerToClient)
	t.Logf("client to OpenVPN: %v", up)
	t.Logf("OpenVPN to client: %v", down)
	t.Logf("%d echo requests, %d answered; goroutines %d -> %d, heap %d -> %d KiB from the tenth rekey",
		sent, answered, goroutines10, goroutinesEnd, heap10>>10, heapEnd>>10)
	if err := s.Err(); err != nil {
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
		t.Errorf("%d of %d echo requests unanswered", sent-answered, sent)
	}
	if st := s.Stats(); st.DroppedData != 0 {
		t.Errorf("client dropped %d data packets", st.DroppedData)
	}
	if goroutinesEnd > goroutines10+4 {
		t.Errorf("goroutines grew from %d at the tenth rekey to %d", goroutines10, goroutinesEnd)
	}
	if heapEnd > heap10+8<<20 {
		t.Errorf("heap grew from %d KiB at the tenth rekey to %d KiB", heap10>>10, heapEnd>>10)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
