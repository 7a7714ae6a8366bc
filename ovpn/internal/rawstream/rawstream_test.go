package rawstream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func TestRawOnLinuxTCP(t *testing.T) {
	c, _ := tcpPair(t)
	_, isRaw := New(c).(*raw)
	if want := runtime.GOOS == "linux"; isRaw != want {
		t.Fatalf("New(*net.TCPConn) raw = %v on %s, want %v", isRaw, runtime.GOOS, want)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := New(a).(plain); !ok {
		t.Fatalf("New(net.Pipe) = %T, want the connection's own methods", New(a))
	}
}

// TestWriteBuffersWholeStream writes more than the socket buffers hold,
// so writev returns short counts and EAGAIN, and checks that the reader
// gets every byte in order.
func TestWriteBuffersWholeStream(t *testing.T) {
	c, s := tcpPair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = s.SetReadBuffer(16 << 10)
	w, r := New(c), New(s)
	var want bytes.Buffer
	var bufs [][]byte
	for i := range 300 {
		b := bytes.Repeat([]byte{byte(i)}, 1+i*37%3000)
		bufs = append(bufs, b)
		want.Write(b)
	}
	bufs = append(bufs, nil) // an empty element is skipped
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	want.Write(big)
	errc := make(chan error, 1)
	go func() {
		n, err := w.WriteBuffers(bufs)
		if err == nil && n != int64(want.Len()-len(big)) {
			err = errors.New("WriteBuffers short count")
		}
		if err == nil {
			var m int
			m, err = w.Write(big)
			if err == nil && m != len(big) {
				err = errors.New("Write short count")
			}
		}
		c.CloseWrite()
		errc <- err
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d (or the order differs)", len(got), want.Len())
	}
}

func TestReadEndsOnDeadlineAndClose(t *testing.T) {
	c, _ := tcpPair(t)
	r := New(c)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 10)
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

func TestReadEOFAndReset(t *testing.T) {
	c, s := tcpPair(t)
	r := New(c)
	if _, err := s.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	buf := make([]byte, 10)
	n, err := io.ReadFull(r, buf[:2])
	if err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, err := r.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer's FIN: %v, want io.EOF", err)
	}
	// A reset peer: writing fails (ECONNRESET or EPIPE), and does not
	// kill the process with SIGPIPE.
	s.SetLinger(0)
	s.Close()
	time.Sleep(20 * time.Millisecond)
	var werr error
	for range 100 {
		if _, werr = r.Write([]byte("after reset")); werr != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if werr == nil {
		t.Fatal("writes to a reset connection kept succeeding")
	}
}

func TestWriteDoesNotAllocate(t *testing.T) {
	c, s := tcpPair(t)
	w := New(c)
	go io.Copy(io.Discard, s)
	p := make([]byte, 1400)
	bufs := [][]byte{p, p, p}
	vec := make([][]byte, len(bufs))
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		copy(vec, bufs)
		if _, err := w.WriteBuffers(vec); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Write and WriteBuffers, want 0", allocs)
	}
}
