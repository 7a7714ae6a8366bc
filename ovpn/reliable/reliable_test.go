package reliable

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

// pipe is a deterministic lossy link: each packet is dropped, duplicated or
// delayed according to a seeded generator; time is a fake clock.
type pipe struct {
	rng                *rand.Rand
	loss, dup, reorder float64
	inTransit          []transit
}

type transit struct {
	at time.Time
	o  Out
}

func (p *pipe) send(now time.Time, o Out) {
	if p.rng.Float64() < p.loss {
		return
	}
	copies := 1
	if p.rng.Float64() < p.dup {
		copies = 2
	}
	for i := 0; i < copies; i++ {
		delay := 10 * time.Millisecond
		if p.rng.Float64() < p.reorder {
			delay += time.Duration(p.rng.IntN(500)) * time.Millisecond
		}
		p.inTransit = append(p.inTransit, transit{now.Add(delay), o})
	}
}

func (p *pipe) deliver(now time.Time, to *Layer, got *[]string) {
	keep := p.inTransit[:0]
	for _, tr := range p.inTransit {
		if tr.at.After(now) {
			keep = append(keep, tr)
			continue
		}
		to.Acked(tr.o.Acks[:tr.o.NumAcks])
		if tr.o.HasID {
			for _, m := range to.Receive(tr.o.ID, tr.o.Op, tr.o.Payload) {
				*got = append(*got, string(m.Payload))
			}
		}
	}
	p.inTransit = keep
}

func run(t *testing.T, seed uint64, loss, dup, reorder float64, n int) (Stats, time.Duration) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	a, b := New(), New()
	ab := &pipe{rng: rng, loss: loss, dup: dup, reorder: reorder}
	ba := &pipe{rng: rng, loss: loss, dup: dup, reorder: reorder}
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("a->b %d", i))
		a.Queue(wire.ControlV1, []byte(want[i]))
		b.Queue(wire.ControlV1, []byte(fmt.Sprintf("b->a %d", i)))
	}
	var gotB, gotA []string
	start := time.Unix(1000, 0)
	now := start
	for step := 0; step < 100000; step++ {
		outs, _ := a.Poll(now)
		for _, o := range outs {
			ab.send(now, o)
		}
		outs, _ = b.Poll(now)
		for _, o := range outs {
			ba.send(now, o)
		}
		ab.deliver(now, b, &gotB)
		ba.deliver(now, a, &gotA)
		if len(gotB) == n && len(gotA) == n && a.Unacked() == 0 && b.Unacked() == 0 {
			break
		}
		now = now.Add(50 * time.Millisecond)
	}
	if len(gotB) != n || len(gotA) != n {
		t.Fatalf("delivered %d and %d of %d (unacked %d/%d)", len(gotB), len(gotA), n, a.Unacked(), b.Unacked())
	}
	for i := range want {
		if gotB[i] != want[i] {
			t.Fatalf("message %d: got %q want %q", i, gotB[i], want[i])
		}
		if w := fmt.Sprintf("b->a %d", i); gotA[i] != w {
			t.Fatalf("message %d: got %q want %q", i, gotA[i], w)
		}
	}
	if a.Unacked() != 0 || b.Unacked() != 0 {
		t.Fatalf("still unacked: %d %d", a.Unacked(), b.Unacked())
	}
	return a.Stats(), now.Sub(start)
}

func TestPerfectLink(t *testing.T) {
	st, took := run(t, 1, 0, 0, 0, 30)
	if st.Retransmits != 0 {
		t.Fatalf("retransmitted %d times on a perfect link", st.Retransmits)
	}
	if took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestLossDuplicationReordering(t *testing.T) {
	for _, c := range []struct {
		name               string
		loss, dup, reorder float64
	}{
		{"loss 30%", 0.3, 0, 0},
		{"duplicates 50%", 0, 0.5, 0},
		{"reordering 50%", 0, 0, 0.5},
		{"everything", 0.2, 0.2, 0.4},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				st, _ := run(t, seed, c.loss, c.dup, c.reorder, 40)
				if c.loss > 0 && st.Retransmits == 0 {
					t.Fatalf("seed %d: no retransmissions under loss", seed)
				}
			}
		})
	}
}

func TestWindowLimitsInFlight(t *testing.T) {
	l := New()
	for i := 0; i < 10; i++ {
		l.Queue(wire.ControlV1, []byte{byte(i)})
	}
	now := time.Unix(0, 0)
	outs, next := l.Poll(now)
	if len(outs) != SendWindow {
		t.Fatalf("sent %d, want window %d", len(outs), SendWindow)
	}
	if next != now.Add(InitialTimeout) {
		t.Fatalf("next %v", next)
	}
	// Acking id 1 but not 0 frees a slot but the window spans ids, so
	// nothing beyond id 5 may go out.
	l.Acked([]uint32{1})
	if outs, _ := l.Poll(now); len(outs) != 0 {
		t.Fatalf("sent %d packets beyond the window", len(outs))
	}
	l.Acked([]uint32{0})
	outs, _ = l.Poll(now.Add(time.Second))
	if len(outs) != 2 || outs[0].ID != 6 || outs[1].ID != 7 {
		t.Fatalf("after acks sent %+v", outs)
	}
	// Retransmission of ids 2..5 after the initial timeout.
	outs, _ = l.Poll(now.Add(InitialTimeout))
	if len(outs) != 4 || outs[0].ID != 2 {
		t.Fatalf("retransmitted %+v", outs)
	}
	outs, next = l.Poll(now.Add(InitialTimeout + 500*time.Millisecond))
	if len(outs) != 0 {
		t.Fatalf("early retransmit of %d", len(outs))
	}
	if got := next.Sub(now); got != 3*time.Second { // ids 6,7 first sent at now+1s
		t.Fatalf("next due after %v", got)
	}
	// At now+5s only 6 and 7 are due again: 2..5 now wait a doubled 4 s.
	outs, _ = l.Poll(now.Add(5 * time.Second))
	if len(outs) != 2 || outs[0].ID != 6 {
		t.Fatalf("at 5s retransmitted %+v", outs)
	}
	outs, _ = l.Poll(now.Add(6 * time.Second))
	if len(outs) != 4 || outs[0].ID != 2 {
		t.Fatalf("at 6s retransmitted %+v", outs)
	}
}

func TestReceiveOrderAcksAndDuplicates(t *testing.T) {
	l := New()
	if got := l.Receive(2, wire.ControlV1, []byte("c")); len(got) != 0 {
		t.Fatal("delivered out of order")
	}
	if got := l.Receive(RecvBuffer, wire.ControlV1, []byte("far")); len(got) != 0 {
		t.Fatal("accepted beyond the receive buffer")
	}
	if got := l.Receive(0, wire.HardResetServerV2, nil); len(got) != 1 || got[0].Op != wire.HardResetServerV2 {
		t.Fatalf("got %+v", got)
	}
	got := l.Receive(1, wire.ControlV1, []byte("b"))
	if len(got) != 2 || string(got[0].Payload) != "b" || string(got[1].Payload) != "c" {
		t.Fatalf("got %+v", got)
	}
	if got := l.Receive(1, wire.ControlV1, []byte("b")); len(got) != 0 {
		t.Fatal("duplicate delivered")
	}
	outs, _ := l.Poll(time.Unix(0, 0))
	if len(outs) != 1 || outs[0].Op != wire.AckV1 {
		t.Fatalf("want one ACK_V1, got %+v", outs)
	}
	acks := outs[0].Acks[:outs[0].NumAcks]
	for _, id := range []uint32{0, 1, 2} {
		if !contains(acks, id) {
			t.Fatalf("ack %d missing from %v", id, acks)
		}
	}
	if contains(acks, RecvBuffer) {
		t.Fatal("acked a dropped message")
	}
	// A later message packet repeats recent acks.
	l.Queue(wire.ControlV1, []byte("x"))
	outs, _ = l.Poll(time.Unix(0, 0))
	if len(outs) != 1 || outs[0].NumAcks == 0 {
		t.Fatalf("message without repeated acks: %+v", outs)
	}
}
