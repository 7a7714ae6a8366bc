package uapi

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
)

func TestKeyHexRoundTripsEveryByteValue(t *testing.T) {
	for b := 0; b < 256; b += len(noise.Key{}) {
		var k noise.Key
		for i := range k {
			k[i] = byte(b + i)
		}
		enc := appendKeyHex(nil, &k)
		if want := hex.EncodeToString(k[:]); string(enc) != want {
			t.Fatalf("appendKeyHex = %s, want %s", enc, want)
		}
		var lower, upper noise.Key
		if !decodeKeyHex(&lower, enc) || lower != k {
			t.Fatalf("decoding lowercase %s failed", enc)
		}
		if !decodeKeyHex(&upper, bytes.ToUpper(enc)) || upper != k {
			t.Fatalf("decoding uppercase %s failed", enc)
		}
	}
}

func TestKeyHexRejectsEveryNonHexCharacter(t *testing.T) {
	valid := []byte(strings.Repeat("0", keyHexLen))
	for c := 0; c < 256; c++ {
		isHex := strings.IndexByte("0123456789abcdefABCDEF", byte(c)) >= 0
		for _, pos := range []int{0, 1, 63} {
			in := bytes.Clone(valid)
			in[pos] = byte(c)
			var k noise.Key
			if got := decodeKeyHex(&k, in); got != isHex {
				t.Fatalf("character %#x at %d: decode ok = %v, want %v", c, pos, got, isHex)
			}
		}
	}
}

func TestKeyHexRejectsWrongLengths(t *testing.T) {
	for _, n := range []int{0, 1, 62, 63, 65, 66, 128} {
		var k noise.Key
		if decodeKeyHex(&k, bytes.Repeat([]byte("a"), n)) {
			t.Errorf("%d characters accepted", n)
		}
	}
}

func TestKeyFormatsAsPlaceholder(t *testing.T) {
	k := noise.Key{1, 2, 3}
	req := device.Config{PrivateKey: &k, Peers: []device.PeerConfig{{PublicKey: k, PresharedKey: &k}}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d"} {
		out := fmt.Sprintf(verb, k) + fmt.Sprintf(verb, req) + fmt.Sprintf(verb, *req.PrivateKey)
		if strings.Contains(out, "010203") || strings.Contains(out, "1 2 3") || strings.Contains(out, "[1 2") {
			t.Errorf("%s leaks key bytes: %s", verb, out)
		}
	}
}

func TestKeyIsZero(t *testing.T) {
	var k noise.Key
	if !k.IsZero() {
		t.Fatal("zero key not zero")
	}
	k[31] = 1
	if k.IsZero() {
		t.Fatal("nonzero key reported zero")
	}
}

func FuzzDecodeKeyHex(f *testing.F) {
	f.Add(strings.Repeat("0", 64))
	f.Add(strings.Repeat("aF", 32))
	f.Add(strings.Repeat("g", 64))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		var k noise.Key
		ok := decodeKeyHex(&k, []byte(s))
		ref, err := hex.DecodeString(s)
		wantOK := err == nil && len(ref) == len(k)
		if ok != wantOK {
			t.Fatalf("decodeKeyHex(%q) ok = %v, encoding/hex says %v", s, ok, wantOK)
		}
		if ok && !bytes.Equal(k[:], ref) {
			t.Fatalf("decodeKeyHex(%q) = %x, want %x", s, k[:], ref)
		}
	})
}
