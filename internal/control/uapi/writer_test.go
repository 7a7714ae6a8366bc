package uapi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/device"
)

// goldenPeers is a device with two peers whose get=1 answer is goldenGet.
func goldenHandler(t testing.TB) *fakeHandler {
	return &fakeHandler{
		dev: device.Status{PrivateKey: mustKey(t, hexPriv), ListenPort: 51820, FwMark: 51820},
		peers: []fakePeer{{
			info: device.PeerStatus{
				PublicKey:           mustKey(t, hexPub1),
				PresharedKey:        mustKey(t, hexPSK),
				Endpoint:            netip.MustParseAddrPort("[2001:db8::1]:51821"),
				LastHandshake:       time.Unix(1700000000, 123456789),
				TxBytes:             1 << 40,
				RxBytes:             18446744073709551615,
				PersistentKeepalive: 25,
			},
			allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")},
		}, {
			info: device.PeerStatus{PublicKey: mustKey(t, hexPub2), Endpoint: netip.MustParseAddrPort("192.0.2.7:9")},
		}},
	}
}

const goldenGet = "private_key=" + hexPriv + "\n" +
	"listen_port=51820\n" +
	"fwmark=51820\n" +
	"public_key=" + hexPub1 + "\n" +
	"preshared_key=" + hexPSK + "\n" +
	"protocol_version=1\n" +
	"endpoint=[2001:db8::1]:51821\n" +
	"last_handshake_time_sec=1700000000\n" +
	"last_handshake_time_nsec=123456789\n" +
	"tx_bytes=1099511627776\n" +
	"rx_bytes=18446744073709551615\n" +
	"persistent_keepalive_interval=25\n" +
	"allowed_ip=10.0.0.0/24\n" +
	"allowed_ip=fd00::/64\n" +
	"public_key=" + hexPub2 + "\n" +
	"preshared_key=" + hexZero + "\n" +
	"protocol_version=1\n" +
	"endpoint=192.0.2.7:9\n" +
	"last_handshake_time_sec=0\n" +
	"last_handshake_time_nsec=0\n" +
	"tx_bytes=0\n" +
	"rx_bytes=0\n" +
	"persistent_keepalive_interval=0\n" +
	"errno=0\n\n"

func TestWriterGolden(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	h := goldenHandler(t)
	if err := w.Finish(h.WriteStatus(w)); err != nil {
		t.Fatal(err)
	}
	if buf.String() != goldenGet {
		t.Fatalf("answer:\n%s\nwant:\n%s", buf.String(), goldenGet)
	}
}

func TestWriterOmitsEmptyDeviceKeys(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Device(device.Status{})
	if err := w.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "errno=0\n\n" {
		t.Fatalf("empty device answered %q", buf.String())
	}
}

func TestWriterHandshakeBefore1970IsNever(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Peer(device.PeerStatus{LastHandshake: time.Unix(-5, 7)})
	w.Flush()
	if !strings.Contains(buf.String(), "last_handshake_time_sec=0\nlast_handshake_time_nsec=0\n") {
		t.Fatalf("got %q", buf.String())
	}
}

func TestWriterRejectsMisuse(t *testing.T) {
	tests := []struct {
		name string
		run  func(w *Writer)
	}{
		{"allowed IP before any peer", func(w *Writer) { w.AllowedIP(netip.MustParsePrefix("10.0.0.0/8")) }},
		{"device after a peer", func(w *Writer) { w.Peer(device.PeerStatus{}); w.Device(device.Status{}) }},
		{"device twice", func(w *Writer) { w.Device(device.Status{}); w.Device(device.Status{}) }},
		{"invalid prefix", func(w *Writer) { w.Peer(device.PeerStatus{}); w.AllowedIP(netip.Prefix{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			tt.run(w)
			if w.Err() == nil {
				t.Fatal("misuse not reported")
			}
			// The answer still ends, with an error the client sees.
			if err := w.Finish(nil); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(buf.String(), "errno=-5\n\n") {
				t.Fatalf("answer %q does not end with errno=-5", buf.String())
			}
		})
	}
}

func TestWriterFinishWritesNegativeErrno(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "errno=0\n\n"},
		{&Error{Errno: ErrnoAddrUse, Msg: "port taken"}, "errno=-98\n\n"},
		{errors.Join(errors.New("wrapped"), &Error{Errno: ErrnoIO}), "errno=-5\n\n"},
		{errors.New("plain"), "errno=-55\n\n"},
		// The device's own errors, as the reference answers them.
		{&device.BindError{What: "listen port", Port: 51820, Err: errors.New("address in use")}, "errno=-98\n\n"},
		{&device.BindError{What: "fwmark", Err: errors.New("not permitted")}, "errno=-98\n\n"},
		{device.ErrClosed, "errno=-5\n\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if err := w.Finish(tt.err); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("Finish(%v) wrote %q, want %q", tt.err, buf.String(), tt.want)
		}
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, io.ErrClosedPipe
	}
	f.after--
	return len(p), nil
}

func TestWriterStopsAtTheFirstWriteError(t *testing.T) {
	h := &fakeHandler{peers: []fakePeer{{gen: 1 << 20}}}
	w := NewWriter(&failWriter{after: 2})
	err := h.WriteStatus(w)
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Get returned %v, want the write error", err)
	}
	if err := w.Finish(nil); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Finish returned %v, want the write error", err)
	}
}

func TestWriterUsesCallersBufioWriter(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := NewWriter(bw)
	w.Device(device.Status{ListenPort: 1})
	if buf.Len() != 0 {
		t.Fatal("wrote through before Flush")
	}
	if bw.Buffered() == 0 {
		t.Fatal("did not use the caller's bufio.Writer")
	}
}

// countingWriter counts lines and bytes and keeps nothing.
type countingWriter struct{ lines, bytes int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	c.bytes += len(p)
	return len(p), nil
}

func TestWriterStreams131071AllowedIPsWithoutAllocating(t *testing.T) {
	const n = 131071
	h := &fakeHandler{peers: []fakePeer{{info: device.PeerStatus{PublicKey: mustKey(t, hexPub1)}, gen: n}}}
	var cw countingWriter
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := NewWriter(&cw)
	if err := w.Finish(h.WriteStatus(w)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// 8 peer lines (no endpoint), n allowed IPs, errno and the blank line.
	if cw.lines != 8+n+2 {
		t.Fatalf("answer has %d lines, want %d", cw.lines, 8+n+2)
	}
	// The answer is over 3 MB; the writer must hold only its buffer.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Fatalf("streaming a %d-byte answer allocated %d bytes", cw.bytes, alloc)
	}
	if allocs := testing.AllocsPerRun(1, func() {
		w := NewWriter(io.Discard)
		w.Finish(h.WriteStatus(w))
	}); allocs > 3 {
		t.Fatalf("%v allocations per answer, want at most 3 (writer and buffer)", allocs)
	}
}

func BenchmarkWriterGet131071AllowedIPs(b *testing.B) {
	h := &fakeHandler{peers: []fakePeer{{info: device.PeerStatus{PublicKey: mustKey(b, hexPub1)}, gen: 131071}}}
	var cw countingWriter
	w := NewWriter(&cw)
	w.Finish(h.WriteStatus(w))
	b.SetBytes(int64(cw.bytes))
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(io.Discard)
		if err := w.Finish(h.WriteStatus(w)); err != nil {
			b.Fatal(err)
		}
	}
}
