package replay

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// rejectAfterMessages is WireGuard's RejectAfterMessages, 2^64 - 2^13 - 1.
const rejectAfterMessages = math.MaxUint64 - (1 << 13)

func TestRejectAfterMessagesValue(t *testing.T) {
	if rejectAfterMessages != 1<<64-1<<13-1 {
		t.Fatal("constant does not equal 2^64 - 2^13 - 1")
	}
}

type step struct {
	counter uint64
	want    bool
}

func run(t *testing.T, f *Filter, limit uint64, steps []step) {
	t.Helper()
	for i, s := range steps {
		if got := f.Validate(s.counter, limit); got != s.want {
			t.Fatalf("step %d: Validate(%d) = %v, want %v", i, s.counter, got, s.want)
		}
	}
}

func TestValidate(t *testing.T) {
	const W = WindowSize
	tests := []struct {
		name  string
		limit uint64
		steps []step
	}{
		{"first packet is accepted once", rejectAfterMessages,
			[]step{{0, true}, {0, false}}},
		{"in-order packets are accepted", rejectAfterMessages,
			[]step{{0, true}, {1, true}, {2, true}, {3, true}, {2, false}}},
		{"duplicates are dropped", rejectAfterMessages,
			[]step{{5, true}, {5, false}, {3, true}, {3, false}, {5, false}, {6, true}, {6, false}}},
		{"reordered packets inside the window are accepted once", rejectAfterMessages,
			[]step{{100, true}, {98, true}, {99, true}, {97, true}, {98, false}, {1, true}, {0, true}, {1, false}}},
		{"window edge is accepted, one beyond is dropped", rejectAfterMessages,
			[]step{{W + 1000, true}, {1000, true}, {999, false}, {1000, false}}},
		{"packets behind the window are dropped even if unseen", rejectAfterMessages,
			[]step{{1, true}, {W + 2, true}, {0, false}, {1, false}, {2, true}}},
		{"a large jump forgets the old window", rejectAfterMessages,
			[]step{{10, true}, {1 << 40, true}, {10, false}, {11, false}, {1<<40 - 10, true}, {1<<40 - W, true}, {1<<40 - W - 1, false}}},
		{"a jump of exactly the ring span reuses the word", rejectAfterMessages,
			[]step{{64, true}, {64 + 128*64, true}, {64, false}, {65 + 127*64, true}, {65 + 127*64, false}}},
		{"counter at the limit is rejected", 100,
			[]step{{99, true}, {100, false}, {101, false}, {98, true}}},
		{"limit zero rejects everything", 0,
			[]step{{0, false}, {1, false}}},
		{"RejectAfterMessages is the first rejected counter", rejectAfterMessages,
			[]step{{rejectAfterMessages - 1, true}, {rejectAfterMessages, false}, {math.MaxUint64, false},
				{rejectAfterMessages - 2, true}, {rejectAfterMessages - 1, false}}},
		{"rejected counters do not move the window", 1 << 20,
			[]step{{5, true}, {1 << 21, false}, {4, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f Filter
			run(t, &f, tc.limit, tc.steps)
		})
	}
}

// TestJumpClearsStaleBits fills the whole ring, then jumps by various
// amounts and checks that every counter in the new window that was never
// accepted is accepted exactly once, and everything older is dropped.
func TestJumpClearsStaleBits(t *testing.T) {
	for _, jump := range []uint64{1, 63, 64, 65, 127 * 64, 128 * 64, 128*64 + 1, 300 * 64, 1 << 32} {
		var f Filter
		const filled = 128 * 64
		for c := range uint64(filled) {
			if !f.Validate(c, rejectAfterMessages) {
				t.Fatalf("jump %d: fill rejected %d", jump, c)
			}
		}
		top := uint64(filled-1) + jump
		if !f.Validate(top, rejectAfterMessages) {
			t.Fatalf("jump %d: top %d rejected", jump, top)
		}
		for c := top - WindowSize - 64; c < top; c++ {
			want := c+WindowSize >= top && c >= filled
			if got := f.Validate(c, rejectAfterMessages); got != want {
				t.Fatalf("jump %d: Validate(%d) with top %d = %v, want %v", jump, c, top, got, want)
			}
			if f.Validate(c, rejectAfterMessages) {
				t.Fatalf("jump %d: %d accepted twice", jump, c)
			}
		}
	}
}

func TestReset(t *testing.T) {
	var f Filter
	for _, c := range []uint64{0, 1, 5000, 1 << 30} {
		f.Validate(c, rejectAfterMessages)
	}
	f.Reset()
	if f != (Filter{}) {
		t.Fatal("Reset left state behind")
	}
	run(t, &f, rejectAfterMessages, []step{{0, true}, {1, true}, {0, false}})
}

// TestEveryCounterOnceUnderReordering delivers a long stream shuffled in
// blocks smaller than the window, as parallel decryption would, and
// checks each counter is accepted exactly once.
func TestEveryCounterOnceUnderReordering(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f Filter
	const n = 200000
	const block = WindowSize / 2
	for base := uint64(0); base < n; base += block {
		perm := rng.Perm(block)
		for _, p := range perm {
			c := base + uint64(p)
			if !f.Validate(c, rejectAfterMessages) {
				t.Fatalf("counter %d rejected", c)
			}
		}
		for _, p := range perm[:100] {
			if f.Validate(base+uint64(p), rejectAfterMessages) {
				t.Fatalf("replayed counter %d accepted", base+uint64(p))
			}
		}
	}
}

// model is a deliberately simple replay filter: a set of seen counters
// and the highest accepted one. It shares no code with Filter.
type model struct {
	seen map[uint64]bool
	last uint64
}

func (m *model) validate(c, limit uint64) bool {
	if c >= limit || m.seen[c] {
		return false
	}
	if c < m.last && m.last-c > WindowSize {
		return false
	}
	m.seen[c] = true
	if c > m.last {
		m.last = c
	}
	return true
}

// runProgram decodes operations from data, applies them to a Filter and
// to the model, and fails on the first disagreement. Each operation is a
// kind byte followed by a 2-byte argument.
func runProgram(t testing.TB, data []byte) {
	var f Filter
	m := &model{seen: map[uint64]bool{}}
	limit := uint64(rejectAfterMessages)
	next := uint64(0) // the counter the sender would use next
	for step := 0; len(data) >= 3; step++ {
		kind := data[0]
		arg := uint64(binary.LittleEndian.Uint16(data[1:3]))
		data = data[3:]
		var c uint64
		switch kind % 8 {
		case 0, 1: // in order
			c = next
		case 2: // a little ahead
			c = next + arg%32
		case 3: // late, around the window edge
			c = next - min(next, arg%(WindowSize+200))
		case 4: // big jump
			c = next + arg*arg*64
		case 5: // near the limit
			c = rejectAfterMessages - 1 - arg%300 + 150
		case 6:
			f.Reset()
			m = &model{seen: map[uint64]bool{}}
			next = 0
			continue
		case 7: // change the limit
			limit = next + arg%64
			continue
		}
		got, want := f.Validate(c, limit), m.validate(c, limit)
		if got != want {
			t.Fatalf("step %d: Validate(%d, limit %d) = %v, model says %v (last %d)", step, c, limit, got, want, m.last)
		}
		if c >= next && c != math.MaxUint64 {
			next = c + 1
		}
		if len(m.seen) > 1<<14 { // keep the model small; old entries are outside the window
			for k := range m.seen {
				if k+WindowSize < m.last {
					delete(m.seen, k)
				}
			}
		}
	}
}

func FuzzFilter(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 2, 5, 0, 3, 3, 0, 3, 3, 0})
	f.Add([]byte{4, 0xff, 0x00, 3, 0xc0, 0x1f, 3, 0xc1, 0x1f, 3, 0xbf, 0x1f, 0, 0, 0})
	f.Add([]byte{5, 150, 0, 5, 149, 0, 5, 151, 0, 5, 150, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0})
	f.Add([]byte{7, 10, 0, 2, 9, 0, 2, 10, 0, 2, 11, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		runProgram(t, data)
	})
}

func TestAgainstModel(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 3))
		data := make([]byte, 30000)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		runProgram(t, data)
	}
}

func BenchmarkValidateInOrder(b *testing.B) {
	var f Filter
	b.ReportAllocs()
	var c uint64
	for b.Loop() {
		f.Validate(c, rejectAfterMessages)
		c++
	}
}

func BenchmarkValidateReordered(b *testing.B) {
	var f Filter
	rng := rand.New(rand.NewPCG(1, 1))
	jitter := make([]uint64, 4096)
	for i := range jitter {
		jitter[i] = uint64(rng.IntN(256))
	}
	b.ReportAllocs()
	var c uint64 = 1 << 20
	for i := 0; b.Loop(); i++ {
		f.Validate(c-jitter[i&4095], rejectAfterMessages)
		c++
	}
}

func TestFilterSize(t *testing.T) {
	if s := unsafe.Sizeof(Filter{}); s != 1032 {
		t.Fatalf("Filter is %d bytes, documented as 1032", s)
	}
}
