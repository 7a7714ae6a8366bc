package bench

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inEpoll reports whether the socket with inode ino is registered with
// any epoll instance of this process (/proc/self/fdinfo lists each
// instance's targets with their inodes, in hex).
func inEpoll(t *testing.T, ino uint64) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	want := fmt.Sprintf(" ino:%x ", ino)
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err == nil && strings.Contains(string(info), want) {
			return true
		}
	}
	return false
}

// A detached socket leaves the runtime's epoll instance (else the kernel
// would still call epoll back for every datagram), still sends, and
// stops sending once shut.
func TestDetachConnLeavesTheNetpoller(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var st unix.Stat_t
	rc, _ := c.SyscallConn()
	rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) })
	if err != nil {
		t.Fatal(err)
	}
	if !inEpoll(t, st.Ino) {
		t.Fatal("a net.UDPConn is not in the runtime's epoll instance: the test would prove nothing")
	}
	p, err := detachConn(c)
	if err != nil {
		t.Fatal(err)
	}
	if inEpoll(t, st.Ino) {
		t.Fatal("the detached socket is still registered with epoll")
	}
	to := rx.LocalAddr().(*net.UDPAddr)
	dst := &unix.SockaddrInet4{Port: to.Port, Addr: [4]byte{127, 0, 0, 1}}
	var serr error
	if err := p.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), []byte("wl"), unix.MSG_DONTWAIT, dst)
		return serr != unix.EAGAIN
	}); err != nil || serr != nil {
		t.Fatalf("write through the detached socket: %v, %v", err, serr)
	}
	rx.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 16)
	if n, err := rx.Read(buf); err != nil || string(buf[:n]) != "wl" {
		t.Fatalf("received %q, %v; want \"wl\"", buf[:n], err)
	}

	// A Read waiting for a datagram that never comes returns once shut.
	done := make(chan error, 1)
	go func() {
		done <- p.Read(func(fd uintptr) bool {
			_, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return err != unix.EAGAIN
		})
	}()
	time.Sleep(2 * pollConnTick * time.Millisecond)
	p.shut()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after shut: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Read did not return after shut")
	}
	if err := p.Write(func(uintptr) bool { return true }); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after shut: %v, want net.ErrClosed", err)
	}
	p.release()
}
