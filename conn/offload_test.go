package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestGSORefusedResendsUnsegmented runs in a namespace whose lo has a 1280
// byte MTU: a segmented send of 1400-byte datagrams is refused (EMSGSIZE)
// while single datagrams of that size are fragmented and delivered. The
// batch must arrive whole, without duplicates, with GSO then off.
func TestGSORefusedResendsUnsegmented(t *testing.T) {
	lo := enterNetns(t)
	if err := netlink.LinkSetMTU(lo, 1280); err != nil {
		t.Fatalf("set lo mtu: %v", err)
	}
	a, _, aport := openBind(t, Options{DisableGRO: true, DisableSourceWatch: true})
	_, bfns, bport := openBind(t, Options{DisableGSO: true, DisableGRO: true, DisableSourceWatch: true})
	if gso, _ := a.Offload(); !gso {
		t.Skip("kernel has no UDP GSO")
	}
	ch := startReceivers(t, bfns, 2048)
	// A run that fits the MTU goes out segmented; the next run does not.
	var sent [][]byte
	for i := 0; i < 32; i++ {
		size := 1000
		if i >= 16 {
			size = 1400
		}
		sent = append(sent, stamped(1, size, 5)[0])
		binary.BigEndian.PutUint32(sent[i][4:8], uint32(i))
	}
	r := NewRoute(Endpoint{Dst: loop4(bport)}, 1)
	if err := a.Send(sent, r); err != nil {
		t.Fatalf("send: %v", err)
	}
	got := collect(t, ch, len(sent), 5*time.Second)
	checkBatch(t, sent, got, loop4(aport), netip.MustParseAddr("127.0.0.1"))
	select {
	case extra := <-ch:
		t.Fatalf("duplicate datagram %d", binary.BigEndian.Uint32(extra.data[4:8]))
	case <-time.After(50 * time.Millisecond):
	}
	if gso, _ := a.Offload(); gso {
		t.Fatal("GSO still on after the kernel refused it")
	}
	// Only the refused size and larger lost GSO (gso_policy.go).
	if got := a.segMax.Load(); got != 1400 {
		t.Fatalf("segment limit %d after 1400-byte segments were refused, want 1400", got)
	}
	// Later batches go out unsegmented.
	more := stamped(8, 1400, 6)
	if err := a.Send(more, r); err != nil {
		t.Fatal(err)
	}
	collect(t, ch, len(more), 5*time.Second)
}
