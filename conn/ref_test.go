package conn

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// countingBind is a Bind that only counts sends.
type countingBind struct {
	mu    sync.Mutex
	sends int
	last  Endpoint
}

func (b *countingBind) Open(uint16) ([]ReceiveFunc, uint16, error) { return nil, 0, nil }
func (b *countingBind) Close() error                               { return nil }
func (b *countingBind) SetMark(uint32) error                       { return nil }
func (b *countingBind) BatchSize() int                             { return IdealBatchSize }
func (b *countingBind) Send(bufs [][]byte, r *Route) error {
	b.mu.Lock()
	b.sends++
	b.last = r.Endpoint
	b.mu.Unlock()
	return nil
}

func TestRefEndpointClear(t *testing.T) {
	var e RefEndpoint
	var b countingBind
	e.Set(Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820")})
	if err := e.Send(&b, nil, [][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	e.Clear()
	if _, ok := e.Endpoint(); ok {
		t.Fatal("endpoint still set after Clear")
	}
	if err := e.Send(&b, nil, [][]byte{{1}}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send after Clear: %v, want ErrNoRoute", err)
	}
	if b.sends != 1 {
		t.Fatalf("%d sends reached the bind, want 1", b.sends)
	}
	e.Set(Endpoint{Dst: netip.MustParseAddrPort("192.0.2.2:51820")})
	if err := e.Send(&b, nil, [][]byte{{1}}); err != nil || b.last.Dst.Port() != 51820 || b.sends != 2 {
		t.Fatalf("send after Set: %v, %d sends", err, b.sends)
	}
}

// TestRefEndpointSendWaitsForLocks shows that the ref path really is the
// locked one: a send waits while the endpoint mutex or the device lock is
// held.
func TestRefEndpointSendWaitsForLocks(t *testing.T) {
	var dev sync.RWMutex
	for _, hold := range []string{"endpoint", "device"} {
		t.Run(hold, func(t *testing.T) {
			var e RefEndpoint
			var b countingBind
			e.Set(Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820")})
			var unlock func()
			if hold == "endpoint" {
				unlock = e.LockWriter()
			} else {
				dev.Lock()
				unlock = dev.Unlock
			}
			done := make(chan error, 1)
			go func() { done <- e.Send(&b, &dev, [][]byte{{1}}) }()
			select {
			case <-done:
				unlock()
				t.Fatalf("send completed while the %s lock was held", hold)
			case <-time.After(50 * time.Millisecond):
			}
			unlock()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("send still blocked after the lock was released")
			}
		})
	}
}
