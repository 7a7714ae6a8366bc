package device

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// TestDirectHandOffKeepsOrder sends numbered packets one way, with every
// batch handled by the goroutine that built it (sent by the TUN reader,
// delivered by the socket's receive goroutine), and with such batches
// mixed with batches queued to the peer's goroutines (inline=toggle flips
// the limit while packets flow), and checks that what arrives is in the
// order it was sent.
func TestDirectHandOffKeepsOrder(t *testing.T) {
	for _, inline := range []int32{128, 2, -1} {
		name := fmt.Sprintf("inline=%d", inline)
		if inline < 0 {
			name = "inline=toggle"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t, pairOpts{tweak: func(a, b *Device) {
				a.inlineCrypto.Store(max(inline, 0))
				b.inlineCrypto.Store(max(inline, 0))
			}})
			p.send(p.ta, p.tb, ipA4, ipB4, "start")
			const total = 3000
			stop := make(chan struct{})
			defer close(stop)
			if inline < 0 {
				go func() {
					for i := int32(0); ; i++ {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Microsecond):
						}
						p.a.inlineCrypto.Store((i % 2) * 128)
						p.b.inlineCrypto.Store(((i / 2) % 2) * 128)
					}
				}()
			}
			go func() {
				payload := make([]byte, 8)
				for i := 0; i < total; i++ {
					binary.BigEndian.PutUint64(payload, uint64(i))
					if p.ta.Inject(ipPacket(ipA4, ipB4, payload)) != nil {
						return
					}
				}
			}()
			last, got := -1, 0
			deadline := time.After(20 * time.Second)
			idle := time.NewTimer(time.Second)
			defer idle.Stop()
			for got < total {
				select {
				case pkt := <-p.tb.Outbound():
					if len(pkt) != 28+8 {
						continue
					}
					seq := int(binary.BigEndian.Uint64(pkt[28:]))
					if seq <= last {
						t.Fatalf("packet %d arrived after packet %d", seq, last)
					}
					last = seq
					got++
					idle.Reset(time.Second)
				case <-idle.C:
					if got < total*9/10 {
						t.Fatalf("only %d of %d packets arrived", got, total)
					}
					return // a few lost to full queues: order is what is checked
				case <-deadline:
					t.Fatalf("only %d of %d packets arrived", got, total)
				}
			}
		})
	}
}
