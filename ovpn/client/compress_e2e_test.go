package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
)

// echo sends an ICMP echo request with payload to the server's tunnel
// address, resending every half second, and reports whether the matching
// reply came back within d.
func echo(t *testing.T, s *Session, seq uint16, payload []byte, d time.Duration) bool {
	t.Helper()
	push := s.Pushed()
	req := testnet.ICMPEcho(8, push.Local.Addr(), push.Remote, 0x78, seq, payload)
	got := make(chan struct{})
	go func() {
		buf := make([]byte, 65535)
		for {
			n, err := s.ReadPacket(buf)
			if err != nil {
				return
			}
			p := buf[:n]
			if n >= 28 && p[9] == 1 && p[20] == 0 && binary.BigEndian.Uint16(p[26:]) == seq && bytes.Equal(p[28:], payload) {
				close(got)
				return
			}
		}
	}()
	deadline := time.After(d)
	for {
		if err := s.WritePacket(req); err != nil {
			t.Fatalf("WritePacket: %v", err)
		}
		select {
		case <-got:
			return true
		case <-deadline:
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Interop with a compressing OpenVPN 2.6.14 server (allow-compression
// yes with comp-lzo yes, compress lz4, compress lz4-v2): pings whose
// payload compresses (zeros, a repeated pattern) come back compressed by
// OpenVPN's liblzo2/liblz4. With the same compress line and
// allow-compression asym, yes, or none (asym then, as in OpenVPN 2.6)
// the client decompresses them (Stats.Decompressed counts them, the
// replies match); with the stub of that framing (comp-lzo no, compress
// stub, compress stub-v2) and allow-compression no they are dropped,
// counted in DroppedCompressed and reported once, while small pings
// (which OpenVPN leaves uncompressed) still get through. For lz4-v2 the
// server also pushes its line: a client without compression lines
// refuses the push (ErrPushedCompression, as OpenVPN 2.6.14's client
// does: "server pushed compression settings that are not allowed"), one
// with allow-compression asym takes it and decompresses.
func TestE2EDecompressFromOpenVPNServer(t *testing.T) {
	e := newEnv(t)
	zeros := make([]byte, 1200)
	pattern := bytes.Repeat([]byte("wirelane"), 150)
	decompresses := func(t *testing.T, c *Session, what string) {
		t.Helper()
		for i, p := range [][]byte{zeros, pattern} {
			if !echo(t, c, uint16(10+i), p, 5*time.Second) {
				t.Fatalf("%s: no reply to a compressible ping (stats %+v)", what, c.Stats())
			}
		}
		st := c.Stats()
		t.Logf("%s: %+v", what, st)
		if st.Decompressed < 2 || st.DecompressFailed+st.DroppedCompressed+st.DroppedData != 0 {
			t.Fatalf("%s: stats %+v", what, st)
		}
	}
	for _, tc := range []struct{ name, line, stub string }{
		{"comp-lzo", "comp-lzo yes", "comp-lzo no"},
		{"lz4", "compress lz4", "compress stub"},
		{"lz4-v2", "compress lz4-v2", "compress stub-v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := e.startServer(t, false, "allow-compression yes", tc.line)
			for _, allow := range []string{"allow-compression asym\n", "allow-compression yes\n", ""} {
				c := dial(t, e.clientConfig(t, srv, tc.line+"\n"+allow), srv.options(t))
				decompresses(t, c, tc.line+", "+cmpStr(strings.TrimSpace(allow), "no allow-compression"))
				c.Close()
			}

			var warnings atomic.Int32
			var last atomic.Value
			opts := srv.options(t)
			opts.OnWarning = func(msg string) { warnings.Add(1); last.Store(msg) }
			c := dial(t, e.clientConfig(t, srv, tc.stub+"\nallow-compression no\n"), opts)
			defer c.Close()
			if echo(t, c, 20, zeros, 2*time.Second) {
				t.Fatal("allow-compression no: a compressed reply was delivered")
			}
			if !echo(t, c, 21, []byte("small"), 5*time.Second) {
				t.Fatal("allow-compression no: a small (uncompressed) ping failed")
			}
			st := c.Stats()
			if st.DroppedCompressed < 2 || st.Decompressed != 0 {
				t.Fatalf("allow-compression no: stats %+v", st)
			}
			if warnings.Load() != 1 || last.Load() != msgCompressedRefused {
				t.Fatalf("allow-compression no: %d warnings, last %v", warnings.Load(), last.Load())
			}
		})
	}
	t.Run("lz4-v2 pushed", func(t *testing.T) {
		srv := e.startServer(t, false, "allow-compression yes", "compress lz4-v2", `push "compress lz4-v2"`)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := Dial(ctx, e.clientConfig(t, srv, ""), srv.options(t)); !errors.Is(err, ErrPushedCompression) {
			if err == nil {
				c.Close()
			}
			t.Fatalf("no compression lines, compress lz4-v2 pushed: %v", err)
		}
		c := dial(t, e.clientConfig(t, srv, "allow-compression asym\n"), srv.options(t))
		defer c.Close()
		decompresses(t, c, "pushed compress lz4-v2, allow-compression asym")
	})
}
