package device

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/mmsg"
)

// udpFlood sends msgs to dst from 64 sockets bound to loopback addresses
// of 127.77.0.0/16 at about rate a second until halted: as cheaply as the
// kernel allows, so that the generator, which shares the machine with the
// responder, takes as little of it as it can. The messages are made once
// (floodInitiations); each of one sender goroutine per CPU cycles through
// its share of the sockets, each connected to dst, with sendmmsg batches of
// up to 64 ready-made headers (no address, no allocation, no poller).
type udpFlood struct {
	sent  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	socks []*net.UDPConn
}

// floodBatch is the most datagrams one sendmmsg of the flood carries.
const floodBatch = 64

func startUDPFlood(tb testing.TB, dst netip.AddrPort, msgs [][]byte, rate int) *udpFlood {
	f := &udpFlood{stop: make(chan struct{})}
	var fds []int
	for i := 0; i < 64; i++ {
		src := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 77, byte(i / 8), byte(1 + i%8)}), 0))
		c, err := net.DialUDP("udp4", src, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			tb.Fatal(err)
		}
		rc, err := c.SyscallConn()
		if err != nil {
			tb.Fatal(err)
		}
		rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
		f.socks = append(f.socks, c)
	}
	workers := max(1, min(runtime.NumCPU(), 4))
	// Headers for every message, once: batches are windows of them.
	iovs := make([]unix.Iovec, len(msgs))
	hdrs := make([]mmsg.Hdr, len(msgs))
	for i, m := range msgs {
		iovs[i].Base = &m[0]
		iovs[i].SetLen(len(m))
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.SetIovlen(1)
	}
	start := time.Now()
	for w := 0; w < workers; w++ {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			// Each worker its own window of the headers (the kernel
			// writes Len into them).
			my := make([]mmsg.Hdr, len(hdrs))
			copy(my, hdrs)
			share := float64(rate) / float64(workers)
			n, k, off := 0, w, 0
			for {
				select {
				case <-f.stop:
					return
				default:
				}
				due := int(time.Since(start).Seconds() * share)
				// At most 50 ms behind: a generator that was not
				// scheduled does not make up for it in one burst.
				n = max(n, due-int(share/20))
				for n < due {
					b := min(due-n, floodBatch, len(my)-off)
					sent, e := mmsg.Send(fds[k%len(fds)], my[off:off+b])
					k += workers
					if e != 0 || sent <= 0 {
						break // socket buffer full: later
					}
					n += sent
					f.sent.Add(int64(sent))
					if off += sent; off >= len(my) {
						off = 0
					}
				}
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	tb.Cleanup(f.halt)
	return f
}

// halt stops the flood and waits for its senders.
func (f *udpFlood) halt() {
	f.once.Do(func() {
		close(f.stop)
		f.wg.Wait()
		for _, c := range f.socks {
			c.Close()
		}
	})
	f.wg.Wait()
}
