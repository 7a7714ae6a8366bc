package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReceiveTimestamps: with timestamps on, a StampedReceiveFunc reports
// how long each datagram waited in the socket's buffer (a datagram left
// there 40 ms reads as at least 40 ms old, and every piece of a GRO train
// and every stashed datagram carries its stamp); off, as after Open,
// every datagram reads 0.
func TestReceiveTimestamps(t *testing.T) {
	a, _, _ := openBind(t, Options{DisableSourceWatch: true})
	for _, gro := range []bool{false, true} {
		b := NewStdBindOptions(Options{DisableSourceWatch: true, DisableGRO: !gro})
		fns, port, err := b.OpenStamped(0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		for fi, dst := range []netip.AddrPort{loop4(port), loop6(port)} {
			if fi == 1 && !b.HasIPv6() {
				continue
			}
			network := map[bool]string{true: "udp4", false: "udp6"}[dst.Addr().Is4()]
			if fi == 1 {
				needIPv6(t, b)
			}
			r := NewRoute(Endpoint{Dst: dst}, 1)
			fn := fns[fi]
			bufs := makeBufs(IdealBatchSize, groBufferSize)
			sizes := make([]int, IdealBatchSize)
			eps := make([]Endpoint, IdealBatchSize)
			arrived := make([]int64, IdealBatchSize)
			// read sends want datagrams of 148 bytes in one batch (one
			// UDP_SEGMENT send: with GRO on, one train at the receiver),
			// waits, and reads them all in batches of 4, so that the rest
			// of a train is stashed.
			read := func(want int, wait time.Duration) []int64 {
				if err := a.Send(makeBufs(want, 148), r); err != nil {
					t.Fatal(err)
				}
				time.Sleep(wait)
				var got []int64
				for len(got) < want {
					for i := range arrived {
						arrived[i] = -1
					}
					n, err := fn(bufs[:4], sizes, eps, arrived)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, arrived[:n]...)
				}
				return got
			}
			name := map[bool]string{false: "plain", true: "GRO"}[gro] + " " + network
			for i, at := range read(3, 0) {
				if at != 0 {
					t.Errorf("%s: timestamps off, datagram %d stamped %d", name, i, at)
				}
			}
			if err := b.SetReceiveTimestamps(true); err != nil {
				t.Fatal(err)
			}
			// The kernel turns arrival stamping on for the whole host
			// from a work queue when the first socket asks for it; until
			// then a datagram is stamped when it is read (it reads as
			// fresh, never as old). Wait for stamping to have begun.
			for deadline := time.Now().Add(5 * time.Second); ; {
				at := read(1, 10*time.Millisecond)[0]
				if time.Duration(time.Now().UnixNano()-at) >= 10*time.Millisecond {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the kernel did not begin stamping datagrams on arrival within 5 s", name)
				}
			}
			const wait = 40 * time.Millisecond
			before := time.Now()
			for i, at := range read(10, wait) {
				age := time.Duration(time.Now().UnixNano() - at)
				if at <= 0 || age < wait || at < before.Add(-time.Second).UnixNano() {
					t.Errorf("%s: datagram %d stamped %d: waited %v in the buffer, want at least %v", name, i, at, age, wait)
				}
			}
			if err := b.SetReceiveTimestamps(false); err != nil {
				t.Fatal(err)
			}
			for i, at := range read(3, 0) {
				if at != 0 {
					t.Errorf("%s: timestamps turned off, datagram %d stamped %d", name, i, at)
				}
			}
		}
	}
}

// TestReceiveTimestampsAllocateNothing: a receive with timestamps on
// allocates nothing, as without.
func TestReceiveTimestampsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, _, _ := openBind(t, Options{DisableSourceWatch: true, DisableGRO: true})
	b := NewStdBindOptions(Options{DisableSourceWatch: true, DisableGRO: true})
	fns, port, err := b.OpenStamped(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetReceiveTimestamps(true); err != nil {
		t.Fatal(err)
	}
	r := NewRoute(Endpoint{Dst: loop4(port)}, 1)
	out := makeBufs(16, 148)
	bufs := makeBufs(IdealBatchSize, 2048)
	sizes := make([]int, IdealBatchSize)
	eps := make([]Endpoint, IdealBatchSize)
	arrived := make([]int64, IdealBatchSize)
	stampedSeen := 0
	round := func() {
		if err := a.Send(out, r); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := fns[0](bufs, sizes, eps, arrived)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range arrived[:n] {
				if at != 0 {
					stampedSeen++
				}
			}
			got += n
		}
	}
	round()
	if n := testing.AllocsPerRun(50, round); n != 0 {
		t.Fatalf("%v allocations per send+receive round with timestamps on", n)
	}
	if stampedSeen == 0 {
		t.Fatal("no datagram was stamped")
	}
}

// TestParseTimestamp reads both layouts of SCM_TIMESTAMPNS.
func TestParseTimestamp(t *testing.T) {
	const sec, nsec = 1764650000, 123456789
	b := make([]byte, timestampSpace)
	putCmsgHeader(b, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, 16)
	putTimespec(b[cmsgHdrLen:], sec, nsec)
	if _, _, _, at := parseControl(b); at != sec*1e9+nsec {
		t.Errorf("SO_TIMESTAMPNS_NEW read as %d", at)
	}
	putCmsgHeader(b, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_OLD, 16)
	if _, _, _, at := parseControl(append(groControl(1200), b...)); at != sec*1e9+nsec {
		t.Errorf("SO_TIMESTAMPNS_OLD after UDP_GRO read as %d", at)
	}
	if at := parseTimestamp(unix.SO_TIMESTAMPNS_OLD, []byte{0x10, 0, 0, 0, 5, 0, 0, 0}); at != 16*1e9+5 {
		t.Errorf("32-bit timespec read as %d", at)
	}
	if at := parseTimestamp(unix.SO_TIMESTAMP, b[cmsgHdrLen:]); at != 0 {
		t.Errorf("SO_TIMESTAMP (microseconds) taken for nanoseconds: %d", at)
	}
}

func putTimespec(b []byte, sec, nsec int64) {
	binary.NativeEndian.PutUint64(b[0:8], uint64(sec))
	binary.NativeEndian.PutUint64(b[8:16], uint64(nsec))
}
