package netcfg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Conf makes changes in one network namespace. Log, when set, receives a
// one-line description of each change, in the style of wg-quick's "[#] ..."
// lines. Conf is not safe for concurrent use.
type Conf struct {
	h *netlink.Handle
	// Undo collects the inverse of every change; nil means "don't record".
	Undo *Undo
	// Log is called with a description of each change; nil = silent.
	Log func(string)

	// nsIno is the inode of the namespace's nsfs file, 0 when unknown:
	// systemd-resolved is used only for links of its own namespace.
	nsIno uint64
}

// New returns a Conf for the calling process's current network namespace.
func New() (*Conf, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, err
	}
	return &Conf{h: h, Undo: &Undo{}, nsIno: nsInode("/proc/thread-self/ns/net")}, nil
}

// NewAt returns a Conf for the network namespace ns.
func NewAt(ns netns.NsHandle) (*Conf, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	var ino uint64
	var st unix.Stat_t
	if unix.Fstat(int(ns), &st) == nil {
		ino = st.Ino
	}
	return &Conf{h: h, Undo: &Undo{}, nsIno: ino}, nil
}

// nsInode returns the inode of a namespace file (/proc/PID/ns/net), 0
// when it cannot be read.
func nsInode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// Close releases the netlink sockets.
func (c *Conf) Close() { c.h.Close() }

func (c *Conf) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func famFlag(fam int) string {
	if fam == unix.AF_INET6 {
		return "-6"
	}
	return "-4"
}

// ignoreGone treats "already gone" as success for inverses: deleting the
// link removes its addresses and routes first.
func ignoreGone(err error) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EADDRNOTAVAIL) {
		return nil
	}
	return err
}
