package client

import (
	"bytes"
	"encoding/binary"
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

// Interop with a compressing OpenVPN 2.6 server (allow-compression yes
// with comp-lzo yes, compress lz4, compress lz4-v2): pings whose payload
// compresses (zeros, a repeated pattern) come back compressed by
// OpenVPN's liblzo2/liblz4. With allow-compression asym or yes the client
// decompresses them (Stats.Decompressed counts them, the replies match);
// with allow-compression no (the default) they are dropped, counted in
// DroppedCompressed and reported once, while small pings (which OpenVPN
// leaves uncompressed) still get through.
func TestE2EDecompressFromOpenVPNServer(t *testing.T) {
	e := newEnv(t)
	zeros := make([]byte, 1200)
	pattern := bytes.Repeat([]byte("wirelane"), 150)
	for _, tc := range []struct{ name, line string }{
		{"comp-lzo", "comp-lzo yes"},
		{"lz4", "compress lz4"},
		{"lz4-v2", "compress lz4-v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := e.startServer(t, false, "allow-compression yes", tc.line)
			for _, mode := range []string{"asym", "yes"} {
				c := dial(t, e.clientConfig(t, srv, tc.line+"\nallow-compression "+mode+"\n"), srv.options(t))
				for i, p := range [][]byte{zeros, pattern} {
					if !echo(t, c, uint16(10+i), p, 5*time.Second) {
						t.Fatalf("%s: no reply to a compressible ping (stats %+v)", mode, c.Stats())
					}
				}
				st := c.Stats()
				t.Logf("%s: %+v", mode, st)
				if st.Decompressed < 2 || st.DecompressFailed+st.DroppedCompressed+st.DroppedData != 0 {
					t.Fatalf("%s: stats %+v", mode, st)
				}
				c.Close()
			}

			var warnings atomic.Int32
			var last atomic.Value
			opts := srv.options(t)
			opts.OnWarning = func(msg string) { warnings.Add(1); last.Store(msg) }
			c := dial(t, e.clientConfig(t, srv, tc.line+"\n"), opts)
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
}
