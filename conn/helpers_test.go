package conn

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
	"unsafe"
)

// openBind opens a StdBind on a free port and closes it with the test.
func openBind(t testing.TB, opts Options) (*StdBind, []ReceiveFunc, uint16) {
	t.Helper()
	b := NewStdBindOptions(opts)
	fns, port, err := b.Open(0)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b, fns, port
}

// needIPv6 skips when the host has no IPv6 loopback.
func needIPv6(t testing.TB, b *StdBind) {
	t.Helper()
	if !b.HasIPv6() {
		t.Skip("IPv6 is disabled on this host")
	}
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	c.Close()
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
}

// receiver gathers datagrams from a bind's ReceiveFuncs into a channel.
type received struct {
	data []byte
	ep   Endpoint
}

func startReceivers(t testing.TB, fns []ReceiveFunc, bufSize int) <-chan received {
	t.Helper()
	out := make(chan received, 1<<16)
	for _, fn := range fns {
		go func(fn ReceiveFunc) {
			bufs := make([][]byte, IdealBatchSize)
			for i := range bufs {
				bufs[i] = make([]byte, bufSize)
			}
			sizes := make([]int, IdealBatchSize)
			eps := make([]Endpoint, IdealBatchSize)
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						t.Errorf("receive: %v", err)
					}
					return
				}
				for i := 0; i < n; i++ {
					select {
					case out <- received{data: append([]byte(nil), bufs[i][:sizes[i]]...), ep: eps[i]}:
					default:
						t.Errorf("receiver channel full")
						return
					}
				}
			}
		}(fn)
	}
	return out
}

// collect reads want datagrams or fails after timeout.
func collect(t testing.TB, ch <-chan received, want int, timeout time.Duration) []received {
	t.Helper()
	var got []received
	deadline := time.After(timeout)
	for len(got) < want {
		select {
		case r := <-ch:
			got = append(got, r)
		case <-deadline:
			t.Fatalf("received %d of %d datagrams", len(got), want)
		}
	}
	return got
}

// stamped builds n datagrams of size bytes, each starting with its index.
func stamped(n, size int, tag uint32) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b[0:4], tag)
		binary.BigEndian.PutUint32(b[4:8], uint32(i))
		for j := 8; j < size; j++ {
			b[j] = byte(i + j)
		}
		bufs[i] = b
	}
	return bufs
}

func loop4(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

func loop6(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.IPv6Loopback(), port)
}

func ptrOf(sa *rawSockaddr) unsafe.Pointer { return unsafe.Pointer(sa) }
