package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
)

// A server with compression framing and a Wirelane client that gets it
// from the push or has it in its file: pings cross the tunnel (the
// framing agrees both ways), nothing is counted as bad, and keepalives
// (framed too) keep the session.
func TestCompressionFraming(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name       string
		framing    data.Framing
		push       string // pushed option ("" = none)
		clientLine string // the client file's own line
	}{
		{"stub-v2 pushed", data.FramingV2, "compress stub-v2", ""},
		{"lz4-v2 pushed", data.FramingV2, "compress lz4-v2", "allow-compression asym\n"},
		{"stub pushed over the file's comp-lzo", data.FramingSwap, "compress", "comp-lzo no\n"},
		{"comp-lzo no in both files", data.FramingLZO, "", "comp-lzo no\n"},
		{"comp-lzo pushed", data.FramingLZO, "comp-lzo no", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.serverConfig(UDP)
			cfg.Compress = tc.framing
			if tc.push != "" {
				cfg.Push = append(cfg.Push, tc.push)
			}
			s := startServer(t, cfg, Options{})
			echoResponder(s)
			c := dialClient(t, f.clientConfig(t, s, "client1", tc.clientLine), client.Options{})
			for i := uint16(1); i <= 3; i++ {
				ping(t, c, s.TunnelAddress().Addr(), i)
			}
			if st := c.Stats(); st.DroppedData+st.DroppedCompressed != 0 {
				t.Fatalf("client dropped packets: %+v", st)
			}
			if bad := s.Stats().BadData.Load() + s.Stats().Compressed.Load(); bad != 0 {
				t.Fatalf("server dropped %d packets", bad)
			}
		})
	}
}

// A pushed compression algorithm is refused by a client that allows
// stubs only (no compress line, or allow-compression no), as OpenVPN
// 2.6.14 refuses it: Dial fails with ErrPushedCompression and the fix.
// With allow-compression asym, or a compress stub-v2 line (which sets no
// stub-only rule in 2.6 either), the push is accepted.
func TestPushedCompressionWithStubsOnly(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Compress, cfg.CompressAlgorithm = data.FramingV2, true
	cfg.Push = append(cfg.Push, "compress lz4-v2")
	s := startServer(t, cfg, Options{})
	for _, lines := range []string{"", "comp-lzo no\nallow-compression no\n"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.Dial(ctx, f.clientConfig(t, s, "client1", lines), client.Options{Logger: testlog.Logger(t), HandshakeTimeout: 5 * time.Second})
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("%q: a pushed compress lz4-v2 was accepted", lines)
		}
		if !errors.Is(err, client.ErrPushedCompression) || !strings.Contains(err.Error(), "allow-compression asym") {
			t.Fatalf("%q: %v", lines, err)
		}
	}
	for _, lines := range []string{"allow-compression asym\n", "compress stub-v2\n"} {
		c := dialClient(t, f.clientConfig(t, s, "client1", lines), client.Options{})
		c.Close()
	}
}

// The framings disagree (the server frames, the client does not): no
// packet gets through, and the server counts them as bad, not as
// delivered.
func TestCompressionFramingMismatch(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Compress = data.FramingLZO
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "client1", ""), client.Options{})
	src, dst := c.Pushed().Local.Addr(), s.TunnelAddress().Addr()
	_ = c.WritePacket(testnet.ICMPEcho(8, src, dst, 1, 1, []byte("unframed")))
	eventually(t, 3*time.Second, "the server counts the unframed packet", func() bool { return s.Stats().BadData.Load() > 0 })
	if s.Stats().Compressed.Load() != 0 {
		t.Fatal("an unframed IP packet counted as compressed")
	}
}

// A payload the client compressed (as an OpenVPN client with
// allow-compression yes sends it: 0x50 0x01 and LZ4 data under stub-v2
// framing) is dropped under compress stub-v2 (a stub drops what it
// gets, whatever allow-compression says, as OpenVPN's does) and under
// allow-compression no, counted in Stats.Compressed, and reported once
// as a ClientWarning event.
func TestCompressedPacketDroppedAndReported(t *testing.T) {
	for _, tc := range []struct {
		name, allow string
		alg         bool
	}{{"stub-v2", "", false}, {"stub-v2 asym", "asym", false}, {"no", "no", true}} {
		t.Run(tc.name, func(t *testing.T) { testCompressedPacketDropped(t, tc.allow, tc.alg) })
	}
}

func testCompressedPacketDropped(t *testing.T, allow string, alg bool) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Compress, cfg.CompressAlgorithm, cfg.AllowCompression = data.FramingV2, alg, allow
	warnings := make(chan Event, 4)
	s := startServer(t, cfg, Options{Events: func(e Event) {
		if e.Kind == ClientWarning {
			warnings <- e
		}
	}})
	echoResponder(s)
	// The client frames nothing, so what it writes is what the server
	// unframes: a stand-in for a compressing peer.
	c := dialClient(t, f.clientConfig(t, s, "client1", ""), client.Options{})
	for i := 0; i < 3; i++ {
		if err := c.WritePacket([]byte{0x50, 0x01, 0xf0, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Second, "three compressed packets counted", func() bool { return s.Stats().Compressed.Load() == 3 })
	select {
	case e := <-warnings:
		if e.Client.CommonName != "client1" || !strings.Contains(e.Reason, "compressed") {
			t.Fatalf("warning %+v", e)
		}
	case <-time.After(time.Second):
		t.Fatal("no ClientWarning")
	}
	if len(warnings) != 0 {
		t.Fatal("warned more than once")
	}
	if s.Stats().BadData.Load() != 0 {
		t.Fatal("compressed packets counted as bad data")
	}
}

// lz4Block compresses p as an OpenVPN peer's LZ4 compressor would (a
// raw LZ4 block).
func lz4Block(t *testing.T, p []byte) []byte {
	t.Helper()
	var c lz4.Compressor
	dst := make([]byte, lz4.CompressBlockBound(len(p)))
	n, err := c.CompressBlock(p, dst)
	if err != nil || n == 0 || n >= len(p) {
		t.Fatalf("lz4: %d of %d bytes, %v", n, len(p), err)
	}
	return dst[:n]
}

// With compress lz4-v2 and allow-compression asym, yes or none (asym
// then, as in OpenVPN 2.6) the server decompresses what a client compressed (0x50 0x01 and an LZ4 block under stub-v2 framing)
// and delivers it: the echo request is answered, and the packet is
// counted in Stats.Decompressed. A decompression bomb (more than tun-mtu)
// and junk are dropped, counted in DecompressFailed, and reported once.
func TestCompressedPacketDecompressed(t *testing.T) {
	f := newFixture(t)
	for _, mode := range []string{"asym", "yes", ""} {
		t.Run("allow-compression "+mode, func(t *testing.T) {
			cfg := f.serverConfig(UDP)
			cfg.Compress, cfg.CompressAlgorithm = data.FramingV2, true
			cfg.AllowCompression = mode
			warnings := make(chan Event, 4)
			s := startServer(t, cfg, Options{Events: func(e Event) {
				if e.Kind == ClientWarning {
					warnings <- e
				}
			}})
			echoResponder(s)
			// The client frames nothing, so what it writes is what the
			// server unframes: a stand-in for a compressing peer.
			c := dialClient(t, f.clientConfig(t, s, "client1", ""), client.Options{})
			src, dst := c.Pushed().Local.Addr(), s.TunnelAddress().Addr()
			req := testnet.ICMPEcho(8, src, dst, 0x55, 9, make([]byte, 1200))
			if err := c.WritePacket(append([]byte{0x50, 0x01}, lz4Block(t, req)...)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2048)
			for {
				n, err := c.ReadPacket(buf)
				if err != nil {
					t.Fatal(err)
				}
				if p := buf[:n]; n == len(req) && p[20] == 0 && binary.BigEndian.Uint16(p[26:]) == 9 {
					break
				}
			}
			if st := s.Stats(); st.Decompressed.Load() != 1 || st.Compressed.Load()+st.DecompressFailed.Load()+st.BadData.Load() != 0 {
				t.Fatalf("decompressed %d, refused %d, failed %d, bad %d", st.Decompressed.Load(), st.Compressed.Load(), st.DecompressFailed.Load(), st.BadData.Load())
			}
			bomb := append([]byte{0x50, 0x01}, lz4Block(t, make([]byte, s.live.Load().cfg.MTU+1))...)
			for _, p := range [][]byte{bomb, {0x50, 0x01, 0xf0, 0xff}, bomb} {
				if err := c.WritePacket(p); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 3*time.Second, "three failures counted", func() bool { return s.Stats().DecompressFailed.Load() == 3 })
			select {
			case e := <-warnings:
				if !strings.Contains(e.Reason, "could not be decompressed") {
					t.Fatalf("warning %+v", e)
				}
			case <-time.After(time.Second):
				t.Fatal("no ClientWarning")
			}
			if len(warnings) != 0 || s.Stats().Decompressed.Load() != 1 || s.Stats().BadData.Load() != 0 {
				t.Fatalf("%d more warnings, %d decompressed, %d bad", len(warnings), s.Stats().Decompressed.Load(), s.Stats().BadData.Load())
			}
		})
	}
}

// The client side, in process: a server without framing sends what a
// compressing server would put under compress lz4-v2 (0x50 0x01 and an
// LZ4 block; a stand-in for OpenVPN, which TestE2EDecompressFromOpenVPNServer
// in ovpn/client uses). A client with compress lz4-v2 and
// allow-compression asym, or none (asym then, as in OpenVPN 2.6),
// delivers the packet and counts it; a bomb and junk are counted in
// DecompressFailed and reported once through OnWarning; a client with
// compress stub-v2 and allow-compression no refuses all of them
// (DroppedCompressed).
func TestClientDecompressesFromServer(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	for mode, lines := range map[string]string{
		"asym":    "compress lz4-v2\nallow-compression asym\n",
		"default": "compress lz4-v2\n",
		"no":      "compress stub-v2\nallow-compression no\n",
	} {
		t.Run(mode, func(t *testing.T) {
			var mu sync.Mutex
			var warnings []string
			c := dialClient(t, f.clientConfig(t, s, "client-"+mode, lines), client.Options{OnWarning: func(m string) {
				mu.Lock()
				warnings = append(warnings, m)
				mu.Unlock()
			}})
			var p *peer
			for _, q := range s.peers() {
				if q.vaddrLoad() == c.Pushed().Local.Addr() {
					p = q
				}
			}
			if p == nil {
				t.Fatal("no peer for the client")
			}
			pkt := testnet.ICMPEcho(0, s.TunnelAddress().Addr(), c.Pushed().Local.Addr(), 0x55, 3, make([]byte, 1000))
			bomb := append([]byte{0x50, 0x01}, lz4Block(t, make([]byte, 1501))...)
			for _, w := range [][]byte{append([]byte{0x50, 0x01}, lz4Block(t, pkt)...), bomb, {0x50, 0x01, 0xf0, 0xff}} {
				if err := p.sendData(w); err != nil {
					t.Fatal(err)
				}
			}
			if mode != "no" {
				buf := make([]byte, 2048)
				n, err := c.ReadPacket(buf)
				if err != nil || !bytes.Equal(buf[:n], pkt) {
					t.Fatalf("read %d bytes, %v", n, err)
				}
			}
			eventually(t, 3*time.Second, "three packets counted", func() bool {
				st := c.Stats()
				return st.Decompressed+st.DecompressFailed+st.DroppedCompressed == 3
			})
			st := c.Stats()
			mu.Lock()
			defer mu.Unlock()
			want := client.Stats{Decompressed: 1, DecompressFailed: 2}
			if mode == "no" {
				want = client.Stats{DroppedCompressed: 3}
			}
			if st.Decompressed != want.Decompressed || st.DecompressFailed != want.DecompressFailed || st.DroppedCompressed != want.DroppedCompressed || st.DroppedData != 0 {
				t.Fatalf("stats %+v", st)
			}
			if len(warnings) != 1 || (mode != "no") != strings.Contains(warnings[0], "could not be decompressed") {
				t.Fatalf("warnings %q", warnings)
			}
		})
	}
}
