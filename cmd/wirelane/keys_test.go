package main

import (
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// FuzzPubkey checks the stdin parser of `pubkey`: it never panics, and it
// accepts exactly a valid key followed by white space or NUL bytes.
func FuzzPubkey(f *testing.F) {
	for _, s := range pubkeyInputs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		pub, err := pubkey(strings.NewReader(in))
		valid := false
		if len(in) >= 44 {
			if k, kerr := wgquick.ParseKey(in[:44]); kerr == nil && strings.Trim(in[44:], " \t\n\v\f\r\x00") == "" {
				valid = true
				if err == nil && pub != k.PublicKey().String() {
					t.Fatalf("pubkey(%q) = %q, want %q", in, pub, k.PublicKey().String())
				}
			}
		}
		if valid != (err == nil) {
			t.Fatalf("pubkey(%q): err %v, valid %v", in, err, valid)
		}
	})
}
