package conn

import (
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// enterNetns moves the calling test goroutine into a fresh network
// namespace with lo up. The goroutine stays locked to its thread, which the
// runtime discards when the test ends, so the namespace dies with the test.
// Sockets opened by the test goroutine afterwards live in that namespace.
func enterNetns(t *testing.T) netlink.Link {
	t.Helper()
	needRoot(t)
	runtime.LockOSThread() // never unlocked: the thread must not be reused
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatalf("lo: %v", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		t.Fatalf("lo up: %v", err)
	}
	return lo
}
