package device

// The rekey soak: sessions renewed many times under traffic, with the
// protocol's timers shortened for the test (Device.tm, which only this
// package's tests can change; no configuration reaches it). Every packet
// arrives, none is sent under a session past RejectAfterTime, and from
// the tenth rekey on the goroutines and the heap stay flat.
//
// SOAK_REKEYS sets the number of rekeys (default 20; scripts/soak.sh runs
// 200).

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
)

// soakTiming is the shortened protocol: a rekey every 60 ms of a session's
// life, sessions rejected at 600 ms (shortTiming, which a
// wirelane_soaktimers daemon takes from WIRELANE_SOAK_REKEY).
func soakTiming(d *Device) { d.tm = shortTiming(60 * time.Millisecond) }

// sessionAge returns how old p's session with remote index idx is, and
// false when p has no such session.
func sessionAge(p *peer, idx uint32, now time.Time) (time.Duration, bool) {
	p.kpMu.Lock()
	defer p.kpMu.Unlock()
	for _, kp := range []*keypair{p.keypairs.current.Load(), p.keypairs.previous, p.keypairs.next} {
		if kp != nil && kp.remoteIndex == idx {
			return now.Sub(kp.created), true
		}
	}
	return 0, false
}

func TestRekeySoak(t *testing.T) {
	rekeys := 20
	if v, err := strconv.Atoi(os.Getenv("SOAK_REKEYS")); err == nil && v > 0 {
		rekeys = v
	}
	p := newPair(t, pairOpts{tweak: func(a, b *Device) { soakTiming(a); soakTiming(b) }})
	p.send(p.ta, p.tb, ipA4, ipB4, "start")
	p.send(p.tb, p.ta, ipB4, ipA4, "start back")
	peerB, peerA := peerOf(p.a, p.kb), peerOf(p.b, p.ka)
	reject := p.a.tm.rejectAfterTime

	// Every transport message on the wire: how old was the sender's
	// session when it went?
	var maxAge atomic.Int64
	var expired, unknown atomic.Int64
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		idx, _, ok := noise.ParseTransportHeader(dg.Data)
		if noise.MessageType(dg.Data) != noise.MessageTransportType || !ok {
			return conntest.Pass
		}
		sender := peerB
		if dg.From == p.bb.Addr() {
			sender = peerA
		}
		age, ok := sessionAge(sender, idx, time.Now())
		switch {
		case !ok:
			unknown.Add(1)
		case age >= reject:
			expired.Add(1)
		}
		for {
			m := maxAge.Load()
			if int64(age) <= m || maxAge.CompareAndSwap(m, int64(age)) {
				break
			}
		}
		return conntest.Pass
	})

	// Traffic both ways, each packet unique, until the rekeys are done.
	var sent [2]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for dir := 0; dir < 2; dir++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, src, dst := p.ta, ipA4, ipB4
			if dir == 1 {
				from, src, dst = p.tb, ipB4, ipA4
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from.Inject(ipPacket(src, dst, []byte(fmt.Sprintf("soak %d %d", dir, i))))
				sent[dir].Add(1)
				// Paced so that a handshake's worth of packets fits the
				// staging queue (MaxStagedPackets) even when the race
				// detector slows the handshake.
				if i%8 == 7 || acceptanceRace {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// Deliveries by sequence number, in bitsets (so that the test's own
	// bookkeeping does not grow the heap it measures).
	var got [2][]uint64
	var count [2]int64
	var gotMu sync.Mutex
	recvDone := make(chan struct{})
	for dir, c := range []<-chan []byte{p.tb.Outbound(), p.ta.Outbound()} {
		go func() {
			for {
				select {
				case pkt := <-c:
					var d, i int
					if _, err := fmt.Sscanf(string(pkt[28:]), "soak %d %d", &d, &i); err != nil || d != dir {
						continue
					}
					gotMu.Lock()
					for len(got[dir]) <= i/64 {
						got[dir] = append(got[dir], 0)
					}
					if got[dir][i/64]&(1<<(i%64)) == 0 {
						got[dir][i/64] |= 1 << (i % 64)
						count[dir]++
					}
					gotMu.Unlock()
				case <-recvDone:
					return
				}
			}
		}()
	}
	defer close(recvDone)

	sessions := map[*keypair]bool{}
	var goroutines10 int
	var heap10 uint64
	deadline := time.Now().Add(time.Duration(rekeys) * 2 * time.Second)
	for len(sessions) <= rekeys && time.Now().Before(deadline) {
		for _, kp := range []*keypair{peerB.keypairs.current.Load(), peerA.keypairs.current.Load()} {
			if kp != nil && kp.isInitiator {
				sessions[kp] = true
			}
		}
		if len(sessions) == 10 && goroutines10 == 0 {
			goroutines10, heap10 = runtime.NumGoroutine(), heapAfterGC()
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Let the last packets land.
	waitFor(t, "the traffic sent during the soak", func() bool {
		gotMu.Lock()
		defer gotMu.Unlock()
		return count[0] >= sent[0].Load() && count[1] >= sent[1].Load()
	})
	p.nw.SetHook(nil)
	goroutinesEnd, heapEnd := runtime.NumGoroutine(), heapAfterGC()
	t.Logf("%d rekeys; %d and %d packets each way, all delivered; oldest session used to send: %v (reject after %v); goroutines %d -> %d, heap %d -> %d KiB",
		len(sessions)-1, sent[0].Load(), sent[1].Load(), time.Duration(maxAge.Load()).Round(time.Millisecond), reject,
		goroutines10, goroutinesEnd, heap10>>10, heapEnd>>10)
	if len(sessions)-1 < rekeys {
		t.Fatalf("only %d rekeys in %v", len(sessions)-1, time.Duration(rekeys)*2*time.Second)
	}
	if expired.Load() != 0 {
		t.Errorf("%d transport messages sent under a session older than RejectAfterTime", expired.Load())
	}
	if unknown.Load() != 0 {
		t.Errorf("%d transport messages sent under a session the sender no longer holds", unknown.Load())
	}
	for _, d := range []*Device{p.a, p.b} {
		if dr := d.Drops(); dr.Replayed != 0 || dr.UnknownIndex != 0 || dr.Unauthenticated != 0 {
			t.Errorf("drops during the soak: %+v", dr)
		}
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
