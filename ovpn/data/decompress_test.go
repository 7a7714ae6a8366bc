package data

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
)

// lzoVector is one line of testdata/lzo1x-vectors.txt: an input
// compressed by liblzo2 (lzo1x-gen.py), known by its length and hash.
type lzoVector struct {
	name  string
	level int
	n     int
	sum   [32]byte
	comp  []byte
}

func lzoVectors(t testing.TB) []lzoVector {
	t.Helper()
	f, err := os.Open("testdata/lzo1x-vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []lzoVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			t.Fatalf("testdata/lzo1x-vectors.txt:%d: %d fields", line, len(fs))
		}
		v := lzoVector{name: fs[0]}
		v.level, _ = strconv.Atoi(fs[1])
		v.n, _ = strconv.Atoi(fs[2])
		sum, err1 := hex.DecodeString(fs[3])
		comp, err2 := hex.DecodeString(fs[4])
		if err1 != nil || err2 != nil || len(sum) != 32 {
			t.Fatalf("testdata/lzo1x-vectors.txt:%d: bad hex", line)
		}
		v.sum, v.comp = [32]byte(sum), comp
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		t.Fatal("no LZO vectors")
	}
	return vs
}

// Streams liblzo2 wrote (LZO1X-1 as OpenVPN's comp-lzo, and LZO1X-999)
// decompress to exactly their input; one byte less room is
// ErrDecompressSize, and a stream cut short is an error, never a panic.
func TestLZO1XVectors(t *testing.T) {
	for _, v := range lzoVectors(t) {
		dst := make([]byte, v.n)
		n, err := lzo1xDecompress(dst, v.comp)
		if err != nil || n != v.n || sha256.Sum256(dst[:n]) != v.sum {
			t.Errorf("%s level %d: %d bytes, %v (want %d)", v.name, v.level, n, err, v.n)
			continue
		}
		if v.n > 0 {
			if _, err := lzo1xDecompress(make([]byte, v.n-1), v.comp); !errors.Is(err, ErrDecompressSize) {
				t.Errorf("%s level %d: one byte short: %v", v.name, v.level, err)
			}
		}
		for _, cut := range []int{1, 2, len(v.comp) / 2} {
			if cut >= len(v.comp) {
				continue
			}
			if _, err := lzo1xDecompress(make([]byte, v.n), v.comp[:len(v.comp)-cut]); !errors.Is(err, ErrDecompress) {
				t.Errorf("%s level %d: cut by %d: %v", v.name, v.level, cut, err)
			}
		}
		if _, err := lzo1xDecompress(make([]byte, v.n), append(append([]byte{}, v.comp...), 0)); !errors.Is(err, ErrDecompress) {
			t.Errorf("%s level %d: trailing byte accepted: %v", v.name, v.level, err)
		}
	}
}

// compressible returns IP-packet-like payloads of n bytes that compress
// well (zeros, a repeated word, text).
func compressible(n int) [][]byte {
	hdr := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 0x40, 1, 0, 0, 10, 8, 0, 2, 10, 8, 0, 1}
	pat := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, n/4)
	txt := bytes.Repeat([]byte("wirelane compresses nothing, decompresses on request. "), n/50+1)
	var out [][]byte
	for _, body := range [][]byte{make([]byte, n), pat, txt} {
		out = append(out, append(append([]byte{}, hdr...), body...)[:n])
	}
	return out
}

func lz4Block(t testing.TB, p []byte) []byte {
	t.Helper()
	var c lz4.Compressor
	dst := make([]byte, lz4.CompressBlockBound(len(p)))
	n, err := c.CompressBlock(p, dst)
	if err != nil || n == 0 {
		t.Fatalf("lz4 compress: %d %v", n, err)
	}
	return dst[:n]
}

// compressedWire is what an OpenVPN peer that compresses p puts under
// framing f: 0x66 and LZO, 0x69 and LZ4 with its first byte swapped to
// the end, 0x50 0x01 and LZ4.
func compressedWire(t testing.TB, f Framing, lzoData, p []byte) []byte {
	switch f {
	case FramingLZO:
		return append([]byte{lzoCompressByte}, lzoData...)
	case FramingSwap:
		c := lz4Block(t, p)
		return append(append([]byte{lz4CompressByte}, c[1:]...), c[0])
	case FramingV2:
		return append([]byte{v2Indicator, v2LZ4}, lz4Block(t, p)...)
	}
	t.Fatalf("framing %v", f)
	return nil
}

// rxBuf copies pkt into a receive buffer as the transports give it
// (64 KiB of capacity).
func rxBuf(pkt []byte) []byte { return append(make([]byte, 0, 65535+Tailroom), pkt...) }

// A channel with a Decompressor delivers what the peer compressed, for
// every framing, and counts it; without one the same packets are
// ErrCompressed. The LZO payload is the liblzo2 vector of a ping packet.
func TestDecryptDecompresses(t *testing.T) {
	var lzoPing lzoVector
	for _, v := range lzoVectors(t) {
		if v.name == "ping-zeros" && v.level == 1 {
			lzoPing = v
		}
	}
	for _, f := range []Framing{FramingLZO, FramingSwap, FramingV2} {
		for _, p := range compressible(1400) {
			var wire []byte
			if f == FramingLZO {
				if p[20] != 0 {
					continue // the LZO vector is the zero-filled ping
				}
				wire = compressedWire(t, f, lzoPing.comp, nil)
			} else {
				wire = compressedWire(t, f, nil, p)
			}
			raw, _ := pair(t, AES256GCM, 0, 3)
			_, srv := framedPair(t, AES256GCM, f, 3)
			if _, _, err := srv.Decrypt(rxBuf(seal(t, raw, wire))); !errors.Is(err, ErrCompressed) {
				t.Fatalf("%v without a decompressor: %v", f, err)
			}
			var ok, failed atomic.Uint64
			srv.SetDecompressor(&Decompressor{Max: 1500, Decompressed: &ok, Failed: &failed})
			out, kind, err := srv.Decrypt(rxBuf(seal(t, raw, wire)))
			if err != nil || kind != KindPacket || len(out) != 1400 {
				t.Fatalf("%v: %d bytes kind %v: %v", f, len(out), kind, err)
			}
			if f == FramingLZO {
				if sha256.Sum256(out) != lzoPing.sum {
					t.Fatalf("LZO: wrong payload")
				}
			} else if !bytes.Equal(out, p) {
				t.Fatalf("%v: wrong payload", f)
			}
			if ok.Load() != 1 || failed.Load() != 0 {
				t.Fatalf("%v: counted %d decompressed, %d failed", f, ok.Load(), failed.Load())
			}
			if len(wire) > 200 {
				t.Fatalf("%v: %d compressed bytes: not a compressed packet", f, len(wire))
			}
		}
	}
}

// Decompression bombs (more than Max once decompressed), junk and
// algorithms OpenVPN never sends are dropped with ErrDecompress and
// counted as failed; nothing is delivered.
func TestDecompressRefusesBombsAndJunk(t *testing.T) {
	var zeros10000 []byte
	for _, v := range lzoVectors(t) {
		if v.name == "zeros10000" && v.level == 1 {
			zeros10000 = v.comp
		}
	}
	big := make([]byte, 1501)
	cases := []struct {
		name string
		f    Framing
		wire []byte
		want error
	}{
		{"LZO bomb", FramingLZO, append([]byte{lzoCompressByte}, zeros10000...), ErrDecompressSize},
		{"LZO junk", FramingLZO, []byte{lzoCompressByte, 0x20, 0xff, 0xff}, ErrDecompress},
		{"LZO empty", FramingLZO, []byte{lzoCompressByte}, ErrDecompress},
		{"LZ4 bomb", FramingV2, compressedWire(t, FramingV2, nil, big), ErrDecompress},
		{"LZ4 swap bomb", FramingSwap, compressedWire(t, FramingSwap, nil, big), ErrDecompress},
		{"LZ4 junk", FramingV2, []byte{v2Indicator, v2LZ4, 0xf0, 0xff, 0xff, 0xff}, ErrDecompress},
		{"v2 zstd", FramingV2, []byte{v2Indicator, 0x04, 1, 2, 3}, ErrDecompress},
		{"v2 LZO code", FramingV2, []byte{v2Indicator, 0x02, 1, 2, 3}, ErrDecompress},
	}
	for _, tc := range cases {
		raw, _ := pair(t, AES128GCM, 0, 3)
		_, srv := framedPair(t, AES128GCM, tc.f, 3)
		var ok, failed atomic.Uint64
		srv.SetDecompressor(&Decompressor{Max: 1500, Decompressed: &ok, Failed: &failed})
		out, _, err := srv.Decrypt(rxBuf(seal(t, raw, tc.wire)))
		if !errors.Is(err, tc.want) || out != nil {
			t.Errorf("%s: %d bytes, %v, want %v", tc.name, len(out), err, tc.want)
		}
		if ok.Load() != 0 || failed.Load() != 1 {
			t.Errorf("%s: counted %d decompressed, %d failed", tc.name, ok.Load(), failed.Load())
		}
	}
	// Exactly Max is accepted.
	raw, _ := pair(t, AES128GCM, 0, 3)
	_, srv := framedPair(t, AES128GCM, FramingV2, 3)
	srv.SetDecompressor(&Decompressor{Max: 1501})
	if out, _, err := srv.Decrypt(rxBuf(seal(t, raw, compressedWire(t, FramingV2, nil, big)))); err != nil || len(out) != 1501 {
		t.Fatalf("at the limit: %d bytes, %v", len(out), err)
	}
}

// Decrypting a compressed packet allocates nothing: the output goes into
// the receive buffer's spare capacity.
func TestDecompressNoAllocation(t *testing.T) {
	var lzoPing lzoVector
	for _, v := range lzoVectors(t) {
		if v.name == "ping-pattern" && v.level == 1 {
			lzoPing = v
		}
	}
	p := compressible(1400)[1]
	for _, f := range []Framing{FramingLZO, FramingSwap, FramingV2} {
		raw, _ := pair(t, AES256GCM, 0, 3)
		_, srv := framedPair(t, AES256GCM, f, 3)
		var ok atomic.Uint64
		srv.SetDecompressor(&Decompressor{Max: 1500, Decompressed: &ok})
		wire := compressedWire(t, f, lzoPing.comp, p)
		buf := make([]byte, Headroom+len(wire)+Tailroom)
		rx := make([]byte, 0, 65535+Tailroom)
		copy(buf[Headroom:], wire)
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf[Headroom:], wire)
			pkt, err := raw.Encrypt(buf, len(wire))
			if err != nil {
				t.Fatal(err)
			}
			rx = append(rx[:0], pkt...)
			if out, _, err := srv.Decrypt(rx); err != nil || len(out) != 1400 {
				t.Fatal(len(out), err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per packet", f, allocs)
		}
		if ok.Load() < 100 {
			t.Errorf("%v: %d decompressed", f, ok.Load())
		}
	}
}

// FuzzLZO1X: any input either decompresses within the destination or is
// an ErrDecompress; never a panic, never a write past dst. A valid
// stream decompresses the same into a larger buffer.
func FuzzLZO1X(f *testing.F) {
	for _, v := range lzoVectors(f) {
		if len(v.comp) < 2000 {
			f.Add(v.comp)
		}
	}
	f.Add([]byte{0x11, 0, 0})
	f.Add([]byte{0x00, 0x00, 0x00, 0x00})
	f.Add([]byte{0x12, 'a', 0x01, 0x00, 0x11, 0, 0})
	f.Fuzz(func(t *testing.T, src []byte) {
		buf := make([]byte, 1500+64)
		for i := range buf {
			buf[i] = 0xa5
		}
		n, err := lzo1xDecompress(buf[:1500], src)
		if err != nil {
			if !errors.Is(err, ErrDecompress) || n != 0 {
				t.Fatalf("error %v with %d bytes", err, n)
			}
			return
		}
		if n > 1500 {
			t.Fatalf("%d bytes", n)
		}
		for _, b := range buf[1500:] {
			if b != 0xa5 {
				t.Fatal("wrote past dst")
			}
		}
		big := make([]byte, 4000)
		if m, err := lzo1xDecompress(big, src); err != nil || m != n || !bytes.Equal(big[:m], buf[:n]) {
			t.Fatalf("larger buffer: %d %v, was %d", m, err, n)
		}
	})
}

// FuzzLZ4Block: the LZ4 path (pierrec/lz4's UncompressBlock behind
// decompressInto) never panics and never returns more than the limit.
func FuzzLZ4Block(f *testing.F) {
	for _, p := range compressible(1400) {
		f.Add(lz4Block(f, p))
	}
	f.Add([]byte{0xf0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x10, 'a', 0x01, 0x00})
	f.Fuzz(func(t *testing.T, src []byte) {
		buf := make([]byte, 4096)
		n, err := decompressInto(buf, src, algLZ4, 1500)
		if err != nil {
			if !errors.Is(err, ErrDecompress) || n != 0 {
				t.Fatalf("error %v with %d bytes", err, n)
			}
			return
		}
		if n <= 0 || n > 1500 {
			t.Fatalf("%d bytes", n)
		}
	})
}

// FuzzDecompressPayload: unframing and decompressing any decrypted
// payload, under every framing, never panics and never delivers more
// than the limit.
func FuzzDecompressPayload(f *testing.F) {
	f.Add([]byte{lzoCompressByte, 0x11, 0, 0})
	f.Add([]byte{v2Indicator, v2LZ4, 0x10, 'a', 0x01, 0x00})
	f.Add([]byte{lz4CompressByte, 'a', 0x01, 0x00, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range []Framing{FramingLZO, FramingSwap, FramingV2} {
			ch := NewFramedChannel(1, fr)
			ch.SetDecompressor(&Decompressor{Max: 1500})
			p := append(make([]byte, 0, len(b)+65535), b...)
			out, _, err := ch.payload(p)
			if err == nil && len(out) > max(len(b), 1500) {
				t.Fatalf("%v: %d bytes from %d", fr, len(out), len(b))
			}
		}
	})
}

// BenchmarkDecryptDecompress: receiving a 1400-byte ping that the peer
// compressed (LZO1X from liblzo2, LZ4), against receiving it
// uncompressed; each iteration receives all three, and the time of each
// is reported as a ratio to the uncompressed receive.
func BenchmarkDecryptDecompress(b *testing.B) {
	var lzoPing lzoVector
	for _, v := range lzoVectors(b) {
		if v.name == "ping-pattern" && v.level == 1 {
			lzoPing = v
		}
	}
	p := compressible(1400)[1]
	cases := []struct {
		f    Framing
		wire []byte
	}{
		{FramingV2, p},
		{FramingLZO, compressedWire(b, FramingLZO, lzoPing.comp, nil)},
		{FramingV2, compressedWire(b, FramingV2, nil, p)},
	}
	type rxCase struct {
		srv    *Channel
		sealed []byte
	}
	rcs := make([]rxCase, len(cases))
	for i, tc := range cases {
		raw, _ := pair(b, AES256GCM, 0, 3)
		_, srv := framedPair(b, AES256GCM, tc.f, 3)
		srv.SetDecompressor(&Decompressor{Max: 1500})
		buf := make([]byte, Headroom+len(tc.wire)+Tailroom)
		copy(buf[Headroom:], tc.wire)
		pkt, err := raw.Encrypt(buf, len(tc.wire))
		if err != nil {
			b.Fatal(err)
		}
		rcs[i] = rxCase{srv, append([]byte(nil), pkt...)}
	}
	rx := make([]byte, 0, 65535+Tailroom)
	var spent [3]time.Duration
	for b.Loop() {
		for i, rc := range rcs {
			rx = append(rx[:0], rc.sealed...)
			rc.srv.primary.Load().replay = replayWindow{} // the same packet id again
			t0 := time.Now()
			out, _, err := rc.srv.Decrypt(rx)
			spent[i] += time.Since(t0)
			if err != nil || len(out) != 1400 {
				b.Fatal(len(out), err)
			}
		}
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "lzo/plain")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "lz4/plain")
}
