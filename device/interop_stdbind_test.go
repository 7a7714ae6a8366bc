package device

import (
	"fmt"
	"testing"

	"github.com/wirelane/wirelane/conn"
)

// The production bind takes part in the interoperability tests too.
func init() {
	extraInteropBinds = append(extraInteropBinds, bindMaker{"stdbind", func() conn.Bind { return conn.NewStdBind() }})
}

// TestStdBindKeepsGRO checks that the device's receive buffers let the
// kernel bind keep UDP GRO on.
func TestStdBindKeepsGRO(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	var sb *conn.StdBind
	bm := bindMaker{"stdbind", func() conn.Bind { sb = conn.NewStdBind(); return sb }}
	s := newInterop(t, bm, false, nil)
	if _, gro := sb.Offload(); !gro {
		t.Skip("this kernel offers no UDP GRO")
	}
	s.toRef(t, ipA4, ipB4, "hello")
	for i := 0; i < 200; i++ {
		s.ref.tun.Outbound <- ipPacket(ipB4, ipA4, []byte(fmt.Sprintf("burst %d", i)))
	}
	s.fromRef(t, ipB4, ipA4, "after the burst")
	if _, gro := sb.Offload(); !gro {
		t.Fatal("GRO was turned off: receive buffers too small for coalesced trains")
	}
}
