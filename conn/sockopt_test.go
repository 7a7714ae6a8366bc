package conn

import (
	"testing"

	"golang.org/x/sys/unix"
)

func sockopt(t *testing.T, u *udpSocket, level, opt int) int {
	t.Helper()
	v, err := unix.GetsockoptInt(u.fd, level, opt)
	if err != nil {
		t.Fatalf("getsockopt %d/%d: %v", level, opt, err)
	}
	return v
}

// TestSocketOptions checks the fwmark (set before and after Open) and the
// forced buffer sizes; both need CAP_NET_ADMIN.
func TestSocketOptions(t *testing.T) {
	needRoot(t)
	b := NewStdBindOptions(Options{DisableSourceWatch: true})
	if err := b.SetMark(51820); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := b.socks.Load()
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u == nil {
			continue
		}
		if m := sockopt(t, u, unix.SOL_SOCKET, unix.SO_MARK); m != 51820 {
			t.Fatalf("mark after Open is %d", m)
		}
		// The kernel reports twice the size it was asked for.
		if n := sockopt(t, u, unix.SOL_SOCKET, unix.SO_RCVBUF); n < socketBufferSize {
			t.Errorf("SO_RCVBUF %d, want at least %d", n, socketBufferSize)
		}
		if n := sockopt(t, u, unix.SOL_SOCKET, unix.SO_SNDBUF); n < socketBufferSize {
			t.Errorf("SO_SNDBUF %d, want at least %d", n, socketBufferSize)
		}
	}
	if err := b.SetMark(0); err != nil {
		t.Fatal(err)
	}
	if m := sockopt(t, s.v4, unix.SOL_SOCKET, unix.SO_MARK); m != 0 {
		t.Fatalf("mark after clearing is %d", m)
	}
}
