package conn

import (
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestIPv6DisabledHost opens a bind in a namespace with IPv6 turned off:
// the bind must still serve IPv4, and an IPv6 send must fail cleanly.
func TestIPv6DisabledHost(t *testing.T) {
	enterNetns(t)
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1"), 0); err != nil {
		t.Skipf("cannot disable IPv6 in the namespace: %v", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0); err != nil {
		t.Skipf("cannot disable IPv6 in the namespace: %v", err)
	}
	a, _, aport := openBind(t, Options{DisableSourceWatch: true})
	_, bfns, bport := openBind(t, Options{DisableSourceWatch: true})
	ch := startReceivers(t, bfns, groBufferSize)
	sent := stamped(4, 100, 1)
	if err := a.Send(sent, NewRoute(Endpoint{Dst: loop4(bport)}, 1)); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, sent, collect(t, ch, len(sent), 5*time.Second), loop4(aport), netip.MustParseAddr("127.0.0.1"))
	err := a.Send(sent, NewRoute(Endpoint{Dst: loop6(bport)}, 1))
	if err == nil {
		t.Fatal("IPv6 send succeeded with IPv6 disabled")
	}
	t.Logf("IPv6 socket open: %v; IPv6 send: %v", a.HasIPv6(), err)
	if !a.HasIPv6() && !errors.Is(err, ErrFamilyUnavailable) {
		t.Fatalf("IPv6 send without an IPv6 socket: %v", err)
	}
}
