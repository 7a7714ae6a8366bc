package device

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/tun"
	"github.com/wirelane/wirelane/tun/memtun"
)

// quietTUN is a memtun device whose MTU events never arrive and whose
// Read can be told to fail once, the way a Linux TUN device fails a read
// whose packet does not fit the buffer it was given.
type quietTUN struct {
	*memtun.Device
	events  chan tun.Event
	failing atomic.Bool
}

func newQuietTUN(t *testing.T, name string, mtu int) *quietTUN {
	q := &quietTUN{Device: memtun.New(name, mtu), events: make(chan tun.Event)}
	t.Cleanup(func() { close(q.events) })
	return q
}

func (q *quietTUN) Events() <-chan tun.Event { return q.events }

func (q *quietTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := q.Device.Read(bufs, sizes, offset)
	if err == nil && q.failing.Swap(false) {
		return 0, errors.New("read len 9000 overflows bufs element len 1424")
	}
	if err == nil && sizes[0] > len(bufs[0])-offset {
		return 0, errors.New("packet truncated: buffer too small")
	}
	return n, err
}

// newPairOn connects two devices running on the given TUN devices; the
// memtun devices inside them inject and collect packets.
func newPairOn(t *testing.T, ta, tb tun.Device, ma, mb *memtun.Device) *pair {
	p := &pair{t: t, ta: ma, tb: mb}
	p.nw, p.ba, p.bb = conntest.NewPair()
	p.a = NewDevice(ta, p.ba, Options{})
	p.b = NewDevice(tb, p.bb, Options{})
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	p.ka, p.kb = mustKey(t), mustKey(t)
	must(t, p.a.Up())
	must(t, p.b.Up())
	connectPair(t, p)
	return p
}

// TestMTURaisedUnderARead raises the MTU without any event reaching the
// device: the TUN reader is already waiting with buffers sized for the
// old MTU, and the first larger packet must still go through.
func TestMTURaisedUnderARead(t *testing.T) {
	qa, qb := newQuietTUN(t, "a", 1420), newQuietTUN(t, "b", 1420)
	p := newPairOn(t, qa, qb, qa.Device, qb.Device)
	p.send(p.ta, p.tb, ipA4, ipB4, "small mtu")
	qa.SetMTU(9000)
	qb.SetMTU(9000)
	for _, size := range []int{9000, 1400, 9000} {
		pkt := ipPacket(ipA4, ipB4, make([]byte, size-28))
		must(t, p.ta.Inject(pkt))
		p.expect(p.tb, pkt)
		back := ipPacket(ipB4, ipA4, make([]byte, size-28))
		must(t, p.tb.Inject(back))
		p.expect(p.ta, back)
	}
	if got := p.a.mtu.Load(); got != 9000 {
		t.Fatalf("device MTU %d after a 9000-byte packet, want 9000", got)
	}
	select {
	case <-p.a.Wait():
		t.Fatal("device closed itself")
	default:
	}
}

// TestTUNReadErrorDropsOnePacket makes one TUN read fail the way an
// oversized packet does: that packet is lost, the device stays up.
func TestTUNReadErrorDropsOnePacket(t *testing.T) {
	qa, qb := newQuietTUN(t, "a", 1420), newQuietTUN(t, "b", 1420)
	p := newPairOn(t, qa, qb, qa.Device, qb.Device)
	p.send(p.ta, p.tb, ipA4, ipB4, "before")
	qa.failing.Store(true)
	lost := ipPacket(ipA4, ipB4, []byte("lost"))
	must(t, p.ta.Inject(lost))
	waitFor(t, "the failing read", func() bool { return !qa.failing.Load() })
	p.send(p.ta, p.tb, ipA4, ipB4, "after")
	select {
	case <-p.a.Wait():
		t.Fatal("device closed itself after one bad read")
	default:
	}
}

// TestLargerPeerMTU: a peer whose MTU is larger than ours sends packets
// that do not fit our MTU-sized buffers; they are still received.
func TestLargerPeerMTU(t *testing.T) {
	ma, mb := memtun.New("a", 9000), memtun.New("b", 1420)
	p := newPairOn(t, ma, mb, ma, mb)
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	for i := 0; i < 3; i++ {
		pkt := ipPacket(ipA4, ipB4, make([]byte, 9000-28-i))
		must(t, p.ta.Inject(pkt))
		p.expect(p.tb, pkt)
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "small again")
	if got := len(p.b.pool.large); got > maxFreeLarge {
		t.Fatalf("%d large packets kept", got)
	}
}

// TestTUNReadErrorClassification separates a broken device from one bad
// packet.
func TestTUNReadErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		err   error
		fatal bool
	}{
		{errClosedTUN, true},
		{os.ErrClosed, true},
		{&os.PathError{Op: "read", Path: "/dev/net/tun", Err: syscall.EBADFD}, true},
		{fmt.Errorf("failed to receive netlink message: %w", syscall.ENOBUFS), true},
		{errors.New("read len 9000 overflows bufs element len 1424"), false},
		{errors.New("invalid ip header version: 7"), false},
	} {
		if got := tunReadFatal(tc.err); got != tc.fatal {
			t.Errorf("tunReadFatal(%v) = %v, want %v", tc.err, got, tc.fatal)
		}
	}
}

// TestInlineAndWorkerCrypto runs the data path with every batch sealed
// and opened by the crypto workers, and with every batch done inline by
// the goroutine that built it: both deliver everything, in order.
func TestInlineAndWorkerCrypto(t *testing.T) {
	for _, inline := range []int32{0, 128} {
		t.Run(fmt.Sprintf("inline=%d", inline), func(t *testing.T) {
			p := newPair(t, pairOpts{tweak: func(a, b *Device) {
				a.inlineCrypto.Store(inline)
				b.inlineCrypto.Store(inline)
			}})
			p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
			const n = 300
			want := make([][]byte, n)
			for i := range want {
				want[i] = ipPacket(ipA4, ipB4, []byte(fmt.Sprintf("packet %d", i)))
				must(t, p.ta.Inject(want[i]))
			}
			for i := range want {
				p.expect(p.tb, want[i])
			}
			p.send(p.tb, p.ta, ipB4, ipA4, "and back")
		})
	}
}
