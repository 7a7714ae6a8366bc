package device

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/internal/sys/refmode"
	"github.com/wirelane/wirelane/tun/memtun"
)

// lockWriter takes the endpoint's mutex and returns its unlock function,
// to show that ref-mode senders do wait for it.
func (e *refEndpoint) lockWriter() (unlock func()) {
	e.mu.Lock()
	return e.mu.Unlock
}

// countingSender is a conn.Sender that only counts sends.
type countingSender struct {
	mu    sync.Mutex
	sends int
	last  conn.Endpoint
}

func (s *countingSender) Send(bufs [][]byte, r *conn.Route) error {
	s.mu.Lock()
	s.sends++
	s.last = r.Endpoint
	s.mu.Unlock()
	return nil
}

func TestRefEndpointClear(t *testing.T) {
	var e refEndpoint
	var s countingSender
	e.set(conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820")})
	if err := e.send(&s, nil, [][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	e.clear()
	if _, ok := e.endpoint(); ok {
		t.Fatal("endpoint still set after clear")
	}
	if err := e.send(&s, nil, [][]byte{{1}}); !errors.Is(err, conn.ErrNoRoute) {
		t.Fatalf("send after clear: %v, want conn.ErrNoRoute", err)
	}
	if s.sends != 1 {
		t.Fatalf("%d sends reached the sender, want 1", s.sends)
	}
	e.set(conn.Endpoint{Dst: netip.MustParseAddrPort("[::ffff:192.0.2.2]:51820")})
	if err := e.send(&s, nil, [][]byte{{1}}); err != nil || s.last.Dst != netip.MustParseAddrPort("192.0.2.2:51820") || s.sends != 2 {
		t.Fatalf("send after set: %v, %d sends to %v", err, s.sends, s.last.Dst)
	}
}

// TestRefEndpointSendWaitsForLocks shows that the ref path really is the
// locked one: a send waits while the endpoint mutex or the device lock is
// held.
func TestRefEndpointSendWaitsForLocks(t *testing.T) {
	var dev sync.RWMutex
	for _, hold := range []string{"endpoint", "device"} {
		t.Run(hold, func(t *testing.T) {
			var e refEndpoint
			var s countingSender
			e.set(conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820")})
			var unlock func()
			if hold == "endpoint" {
				unlock = e.lockWriter()
			} else {
				dev.Lock()
				unlock = dev.Unlock
			}
			done := make(chan error, 1)
			go func() { done <- e.send(&s, &dev, [][]byte{{1}}) }()
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

// TestNewDeviceTakesRefModeFromTheSwitch: NewDevice reads
// internal/sys/refmode once, and the device keeps that mode.
func TestNewDeviceTakesRefModeFromTheSwitch(t *testing.T) {
	for _, on := range []bool{false, true} {
		was := refmode.Set(on)
		d := NewDevice(memtun.New("rm", 1420), conntest.NewNetwork().NewBind(netip.MustParseAddr("192.0.2.1")), Options{})
		refmode.Set(was)
		if d.refMode != on {
			t.Errorf("refmode.Set(%v): device refMode = %v", on, d.refMode)
		}
		d.Close()
	}
}
