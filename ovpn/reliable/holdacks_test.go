package reliable

import (
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

// TestHoldAcks: while acks are held, a received message is delivered but
// not acknowledged, neither alone nor piggybacked on a message we send
// (which still goes out); once released, the ack goes out.
func TestHoldAcks(t *testing.T) {
	l := New()
	now := time.Unix(100, 0)
	l.SetHoldAcks(true)
	if msgs := l.Receive(0, wire.ControlV1, []byte("key_method_2")); len(msgs) != 1 {
		t.Fatalf("delivered %d messages, want 1", len(msgs))
	}
	l.Queue(wire.ControlV1, []byte("ours"))
	out, _ := l.Poll(now)
	if len(out) != 1 || !out[0].HasID || out[0].NumAcks != 0 {
		t.Fatalf("held: %+v, want our message alone, without acks", out)
	}
	l.SetHoldAcks(false)
	out, _ = l.Poll(now)
	if len(out) != 1 || out[0].Op != wire.AckV1 || out[0].NumAcks != 1 || out[0].Acks[0] != 0 {
		t.Fatalf("released: %+v, want the ack of message 0", out)
	}
}
