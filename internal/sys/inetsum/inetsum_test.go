package inetsum

import (
	"math/rand/v2"
	"testing"
)

// The example of RFC 1071, section 3: the words 0001 f203 f4f5 f6f7 sum
// to ddf2 once folded.
func TestRFC1071Example(t *testing.T) {
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := Fold(Add(0, b)); got != 0xddf2 {
		t.Fatalf("sum %#04x, want 0xddf2", got)
	}
	if got := Checksum(b); got != ^uint16(0xddf2) {
		t.Fatalf("checksum %#04x, want %#04x", got, ^uint16(0xddf2))
	}
}

// Add agrees with a word-at-a-time sum on every length (odd ones
// included), and a buffer carrying its own checksum sums to 0xffff.
func TestAddMatchesWordSum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		var want uint32
		for i := 0; i+1 < n; i += 2 {
			want += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if n%2 == 1 {
			want += uint32(b[n-1]) << 8
		}
		for want>>16 != 0 {
			want = want&0xffff + want>>16
		}
		if got := Fold(Add(0, b)); got != uint16(want) {
			t.Fatalf("length %d: sum %#04x, want %#04x", n, got, want)
		}
		if n >= 2 && n%2 == 0 {
			b[0], b[1] = 0, 0
			c := Checksum(b)
			b[0], b[1] = byte(c>>8), byte(c)
			if got := Fold(Add(0, b)); got != 0xffff {
				t.Fatalf("length %d: with its checksum the sum is %#04x", n, got)
			}
		}
	}
}

// Pieces summed separately, through acc or with +, agree with the whole,
// including when acc starts near 2^64.
func TestAddPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 2000; n++ {
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cut := r.IntN(len(b)+1) &^ 1
		whole := Fold(Add(0, b))
		if got := Fold(Add(Add(0, b[:cut]), b[cut:])); got != whole {
			t.Fatalf("len %d cut %d: through acc %#04x, whole %#04x", len(b), cut, got, whole)
		}
		if got := Fold(Add(0, b[:cut]) + Add(0, b[cut:])); got != whole {
			t.Fatalf("len %d cut %d: with + %#04x, whole %#04x", len(b), cut, got, whole)
		}
		// 2^64-1 is a ones' complement zero: adding it changes nothing
		// once folded (up to the two zeros 0x0000 and 0xffff).
		got := Fold(Add(^uint64(0), b))
		if got != whole && !(got == 0xffff && whole == 0) && !(got == 0 && whole == 0xffff) {
			t.Fatalf("len %d: from 2^64-1 %#04x, whole %#04x", len(b), got, whole)
		}
	}
}

func BenchmarkAdd1408(b *testing.B) {
	buf := make([]byte, 1408)
	b.SetBytes(int64(len(buf)))
	var acc uint64
	for b.Loop() {
		acc += Add(0, buf)
	}
	_ = acc
}

// withScalar runs f with the scalar code only (no sumWords).
func withScalar(f func()) {
	old := haveSumWords
	haveSumWords = false
	defer func() { haveSumWords = old }()
	f()
}

// The vector sum agrees with the scalar one on every length up to a few
// thousand bytes at every start within a word, on buffers above
// maxWordsBytes (two vector calls), and on all-0xff data, where each of
// the vector code's 32-bit lanes comes closest to overflowing.
func TestVectorAddMatchesScalar(t *testing.T) {
	if !haveSumWords {
		t.Skip("no AVX2 here: Add is the scalar code, tested above")
	}
	r := rand.New(rand.NewPCG(9, 10))
	buf := make([]byte, 4100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(name string, b []byte, acc uint64) {
		t.Helper()
		got := Add(acc, b)
		var want uint64
		withScalar(func() { want = Add(acc, b) })
		if got != want {
			t.Fatalf("%s (%d bytes, acc %#x): vector %#x, scalar %#x", name, len(b), acc, got, want)
		}
	}
	for n := 0; n <= 4096; n++ {
		for _, at := range []int{0, 1, 2, 3} {
			check("random", buf[at:at+n], uint64(r.Uint32()))
		}
	}
	big := make([]byte, 2*maxWordsBytes+77)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	check("random, past maxWordsBytes", big, 0)
	for i := range big {
		big[i] = 0xff
	}
	check("all ones", big, 0)
	check("all ones, one call", big[:maxWordsBytes], 0)
	clear(big)
	check("all zero", big, 0)
}

func BenchmarkAdd1408Scalar(b *testing.B) {
	buf := make([]byte, 1408)
	b.SetBytes(int64(len(buf)))
	var acc uint64
	withScalar(func() {
		for b.Loop() {
			acc += Add(0, buf)
		}
	})
	_ = acc
}
