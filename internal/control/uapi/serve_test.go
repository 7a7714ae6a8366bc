package uapi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/device"
)

// socketPair returns the two ends of a connected UNIX stream socket pair, as
// a client of the real socket would see them.
func socketPair(t testing.TB) (client, server *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	client, server = conv(fds[0]), conv(fds[1])
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// converse sends the client's whole side of a conversation, closes its
// writing half, and returns everything the server answered before closing
// the connection, and Serve's result.
func converse(t *testing.T, h Handler, in string) (string, error) {
	t.Helper()
	client, server := socketPair(t)
	served := make(chan error, 1)
	go func() { served <- Serve(server, h) }()
	go func() {
		io.WriteString(client, in)
		client.CloseWrite()
	}()
	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	out, err := io.ReadAll(client)
	if err != nil && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("reading answers: %v", err)
	}
	select {
	case err := <-served:
		return string(out), err
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
		return "", nil
	}
}

// wgSetRequest is, byte for byte, what `wg set` sends for
//
//	wg set IF private-key K listen-port 51820 fwmark 0x1234 peer P1 \
//	  preshared-key PSK endpoint [2001:db8::1]:51821 persistent-keepalive 25 \
//	  allowed-ips 10.0.0.0/24,fd00::/64 peer P2 remove
//
// following the order of wireguard-tools' userspace set routine.
const wgSetRequest = "set=1\n" +
	"private_key=" + hexPriv + "\n" +
	"listen_port=51820\n" +
	"fwmark=4660\n" +
	"public_key=" + hexPub1 + "\n" +
	"preshared_key=" + hexPSK + "\n" +
	"endpoint=[2001:db8::1]:51821\n" +
	"persistent_keepalive_interval=25\n" +
	"replace_allowed_ips=true\n" +
	"allowed_ip=10.0.0.0/24\n" +
	"allowed_ip=fd00::/64\n" +
	"public_key=" + hexPub2 + "\n" +
	"remove=true\n" +
	"\n"

func TestServeGoldenConversation(t *testing.T) {
	h := goldenHandler(t)
	// A set as wg sends it, then a get as wg and wgctrl send it, on one
	// connection.
	out, err := converse(t, h, wgSetRequest+"get=1\n\n")
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if want := "errno=0\n\n" + goldenGet; out != want {
		t.Fatalf("answers:\n%q\nwant:\n%q", out, want)
	}
	sets := h.applied()
	want := device.Config{
		PrivateKey: ptr(mustKey(t, hexPriv)),
		ListenPort: ptr(uint16(51820)),
		FwMark:     ptr(uint32(0x1234)),
		Peers: []device.PeerConfig{{
			PublicKey:           mustKey(t, hexPub1),
			PresharedKey:        ptr(mustKey(t, hexPSK)),
			Endpoint:            ptr(h.peers[0].info.Endpoint),
			PersistentKeepalive: ptr(uint16(25)),
			ReplaceAllowedIPs:   true,
			AllowedIPs:          []device.AllowedIPChange{{Prefix: h.peers[0].allowed[0]}, {Prefix: h.peers[0].allowed[1]}},
		}, {
			PublicKey: mustKey(t, hexPub2),
			Remove:    true,
		}},
	}
	if len(sets) != 1 || !reflect.DeepEqual(sets[0], want) {
		t.Fatalf("applied %d requests:\n%s\nwant:\n%s", len(sets), formatSetAll(sets), formatSet(&want))
	}
}

func formatSetAll(sets []device.Config) string {
	var b strings.Builder
	for i := range sets {
		b.WriteString(formatSet(&sets[i]) + "--\n")
	}
	return b.String()
}

func TestServeConversations(t *testing.T) {
	pk := "public_key=" + hexPub1 + "\n"
	tests := []struct {
		name    string
		setErr  error
		getErr  error
		in      string
		want    string
		applied int
		served  func(error) bool
	}{
		{
			name: "a bad set is answered and the connection stays in step",
			in:   "set=1\n" + pk + "allowed_ip=10.0.0.0/33\nallowed_ip=10.0.0.0/8\n\n" + "set=1\nlisten_port=7\n\n" + "set=1\n\n",
			want: "errno=-22\n\nerrno=0\n\nerrno=0\n\n", applied: 2,
		},
		{
			name: "a line without '=' is answered with EPROTO and the connection stays usable",
			in:   "set=1\nnonsense\n\nset=1\n\n",
			want: "errno=-71\n\nerrno=0\n\n", applied: 1,
		},
		{
			name: "an unknown operation gets EPROTO and ends the connection",
			in:   "set=1\n\nget=2\nset=1\n\n",
			want: "errno=0\n\nerrno=-71\n\n", applied: 1,
			served: func(err error) bool {
				var e *Error
				return errors.As(err, &e) && e.Errno == ErrnoProtocol
			},
		},
		{
			name: "a stray blank line is an unknown operation",
			in:   "\nset=1\n\n",
			want: "errno=-71\n\n",
			served: func(err error) bool {
				var e *Error
				return errors.As(err, &e) && e.Errno == ErrnoProtocol
			},
		},
		{
			name: "an operation line too long is an unknown operation",
			in:   strings.Repeat("x", 70000) + "\nset=1\n\n",
			want: "errno=-71\n\n",
			served: func(err error) bool {
				var e *Error
				return errors.As(err, &e) && e.Errno == ErrnoProtocol
			},
		},
		{
			name: "get=1 with an argument is invalid and the connection stays in step",
			in:   "get=1\nfoo=bar\n\nset=1\n\n",
			want: "errno=-22\n\nerrno=0\n\n", applied: 1,
		},
		{
			name: "a set that ends at EOF without its blank line is not applied nor answered",
			in:   "set=1\n\nset=1\nlisten_port=1\n",
			want: "errno=0\n\n", applied: 1,
			served: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) },
		},
		{
			name:   "a set cut inside a line is not applied nor answered",
			in:     "set=1\nlisten_port=1",
			want:   "",
			served: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) },
		},
		{
			name:   "a get without its blank line is not answered",
			in:     "get=1\n",
			want:   "",
			served: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) },
		},
		{
			name:   "the handler's *Error is answered with its errno",
			setErr: &Error{Errno: ErrnoAddrUse, Msg: "port in use"},
			in:     "set=1\nlisten_port=1\n\n",
			want:   "errno=-98\n\n", applied: 1,
		},
		{
			name:   "any other handler error is answered as ENOANO",
			setErr: errors.New("something"),
			in:     "set=1\n\n",
			want:   "errno=-55\n\n", applied: 1,
		},
		{
			name:   "a failing get ends with its errno",
			getErr: &Error{Errno: ErrnoIO, Msg: "device closed"},
			in:     "get=1\n\n",
			want:   "errno=-5\n\n",
		},
		{
			name: "a client that sends nothing ends cleanly",
			in:   "",
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHandler{setErr: tt.setErr, getErr: tt.getErr}
			out, err := converse(t, h, tt.in)
			if out != tt.want {
				t.Errorf("answers %q, want %q", out, tt.want)
			}
			if n := len(h.applied()); n != tt.applied {
				t.Errorf("%d requests applied, want %d", n, tt.applied)
			}
			if tt.served == nil && err != nil {
				t.Errorf("Serve returned %v, want nil", err)
			}
			if tt.served != nil && !tt.served(err) {
				t.Errorf("Serve returned unexpected %v", err)
			}
		})
	}
}

// TestServeStreams131071AllowedIPs reads a get answer for one peer with
// 131,071 allowed IPs through a real socket, line by line, and checks that
// serving it allocates far less than the answer's size.
func TestServeStreams131071AllowedIPs(t *testing.T) {
	const n = 131071
	h := &fakeHandler{peers: []fakePeer{{info: device.PeerStatus{PublicKey: mustKey(t, hexPub1)}, gen: n}}}
	client, server := socketPair(t)
	served := make(chan error, 1)
	go func() { served <- Serve(server, h) }()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := io.WriteString(client, "get=1\n\n"); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(client)
	var lines, allowed, size int
	var last []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", lines, err)
		}
		lines++
		size += len(line)
		if len(line) == 1 {
			break
		}
		if bytes.HasPrefix(line, []byte("allowed_ip=")) {
			if allowed < 3 || allowed == n-1 {
				if want := "allowed_ip=" + genPrefix(allowed).String() + "\n"; string(line) != want {
					t.Fatalf("allowed IP %d: %q, want %q", allowed, line, want)
				}
			}
			allowed++
		}
		last = append(last[:0], line...)
	}
	runtime.ReadMemStats(&after)
	if allowed != n || string(last) != "errno=0\n" {
		t.Fatalf("read %d allowed IPs ending with %q, want %d and errno=0", allowed, last, n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(size)/8 {
		t.Fatalf("serving a %d-byte answer allocated %d bytes; the answer must stream", size, alloc)
	}
	client.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

var answerRE = regexp.MustCompile(`^errno=(0|-[1-9][0-9]*)$`)

// FuzzServe feeds arbitrary bytes to the operation loop: it must end (the
// input is finite), never panic, and write only whole answers.
func FuzzServe(f *testing.F) {
	f.Add([]byte(wgSetRequest + "get=1\n\n"))
	f.Add([]byte("get=1\n\nget=1\n\n"))
	f.Add([]byte("set=1\nbogus\n\nget=1\nx\n\n"))
	f.Add([]byte("set=1\nlisten_port=1"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte("get=1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h := goldenHandler(t)
		var out bytes.Buffer
		err := serve(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), &out}, h)
		_ = err
		// Every answer ends with an errno line and a blank line, and a
		// get answer is the golden one.
		rest := out.String()
		for rest != "" {
			rest = strings.TrimPrefix(rest, strings.TrimSuffix(goldenGet, "errno=0\n\n"))
			i := strings.Index(rest, "\n\n")
			if i < 0 {
				t.Fatalf("unterminated answer %q in %q", rest, out.String())
			}
			if !answerRE.MatchString(rest[:i]) {
				t.Fatalf("malformed answer %q in %q", rest[:i], out.String())
			}
			rest = rest[i+2:]
		}
		for _, req := range h.applied() {
			if _, err := ParseSet(strings.NewReader(formatSet(&req) + "\n")); err != nil {
				t.Fatalf("applied a request that does not re-parse: %v", err)
			}
		}
	})
}

// BenchmarkServeGet131071AllowedIPs measures a whole get=1 conversation for
// a peer with 131,071 allowed IPs over a UNIX socket, the client reading
// line by line as wg does.
func BenchmarkServeGet131071AllowedIPs(b *testing.B) {
	h := &fakeHandler{peers: []fakePeer{{info: device.PeerStatus{PublicKey: mustKey(b, hexPub1)}, gen: 131071}}}
	client, server := socketPair(b)
	go Serve(server, h)
	br := bufio.NewReaderSize(client, 64<<10)
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.WriteString(client, "get=1\n\n"); err != nil {
			b.Fatal(err)
		}
		size = 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			size += int64(len(line))
			if len(line) == 1 {
				break
			}
		}
	}
	b.SetBytes(size)
}
