// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The Wycheproof vectors come from the C2SP module through the Go module
// proxy, the way golang.org/x/crypto's tests fetch them (go mod download
// -json, then the module cache), at the version x/crypto pins.
const wycheproofModule = "github.com/C2SP/wycheproof@v0.0.0-20250901140545-b51abcfb8daf"

var wycheproofDir = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", wycheproofModule)
	cmd.Dir = os.TempDir() // outside this module: no go.mod to consult or change
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	out, runErr := cmd.Output()
	var dm struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dm); err != nil {
		return "", fmt.Errorf("go mod download -json %s: %v (%v): %s", wycheproofModule, runErr, err, out)
	}
	if dm.Error != "" || runErr != nil {
		return "", fmt.Errorf("go mod download -json %s: %v: %s", wycheproofModule, runErr, dm.Error)
	}
	return dm.Dir, nil
})

// unreachable reports whether a download error means the module proxy
// (or the network) could not be reached, rather than a real failure.
func unreachable(err error) bool {
	s := err.Error()
	for _, sign := range []string{"dial tcp", "no such host", "i/o timeout", "connection refused",
		"network is unreachable", "GOPROXY=off", "disabled by GOPROXY", "TLS handshake timeout", "proxyconnect"} {
		if strings.Contains(s, sign) {
			return true
		}
	}
	return false
}

type wycheproofFile struct {
	NumberOfTests int `json:"numberOfTests"`
	TestGroups    []struct {
		IVSize  int `json:"ivSize"`
		KeySize int `json:"keySize"`
		TagSize int `json:"tagSize"`
		Tests   []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Key     string   `json:"key"`
			IV      string   `json:"iv"`
			AAD     string   `json:"aad"`
			Msg     string   `json:"msg"`
			CT      string   `json:"ct"`
			Tag     string   `json:"tag"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

func loadWycheproof(t *testing.T) *wycheproofFile {
	t.Helper()
	if testing.Short() {
		t.Skip("the Wycheproof vectors are downloaded through the Go module proxy; not in -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to download the Wycheproof vectors: %v", err)
	}
	dir, err := wycheproofDir()
	if err != nil {
		if unreachable(err) {
			t.Skipf("the Go module proxy is unreachable, Wycheproof vectors not tested: %v", err)
		}
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "testvectors_v1", "chacha20_poly1305_test.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f wycheproofFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// TestWycheproof runs every ChaCha20-Poly1305 vector of Wycheproof through
// New: once as the data path runs it (the kernels above kernelMin where the
// CPU has AVX-512, x/crypto below), and once with the kernels forced for
// every length, with and without IFMA Poly1305, so that the invalid-tag
// vectors (all shorter than 256 bytes) reach the assembly too.
func TestWycheproof(t *testing.T) {
	f := loadWycheproof(t)
	t.Run("default", func(t *testing.T) { runWycheproof(t, f) })
	t.Run("kernels", func(t *testing.T) {
		requireKernel(t)
		runWycheproof(t, f)
	})
	t.Run("kernels-scalar-poly", func(t *testing.T) {
		requireKernel(t)
		withScalarPoly(t, func(t *testing.T) { runWycheproof(t, f) })
	})
}

func runWycheproof(t *testing.T, f *wycheproofFile) {
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n, invalid, inKernel := 0, 0, 0
	for _, g := range f.TestGroups {
		for _, tc := range g.Tests {
			n++
			key, iv, aad, msg := unhex(tc.Key), unhex(tc.IV), unhex(tc.AAD), unhex(tc.Msg)
			sealed := append(unhex(tc.CT), unhex(tc.Tag)...)
			a, err := New(key)
			if err != nil {
				t.Fatalf("tcId %d: %v", tc.TcID, err)
			}
			if _, kernel := a.(*aead); kernel && len(msg) >= kernelMin {
				inKernel++
			}
			if tc.Result == "invalid" {
				invalid++
			}
			if len(iv) != NonceSize {
				// Only 96-bit nonces exist here; others must be refused.
				if tc.Result == "valid" {
					t.Errorf("tcId %d: a valid vector with a %d-byte nonce", tc.TcID, len(iv))
				}
				if !panics(func() { a.Open(nil, iv, sealed, aad) }) {
					t.Errorf("tcId %d (%s): Open took a %d-byte nonce", tc.TcID, tc.Comment, len(iv))
				}
				continue
			}
			got, err := a.Open(nil, iv, sealed, aad)
			// In place too, as the data path opens.
			buf := append([]byte(nil), sealed...)
			gotInPlace, errInPlace := a.Open(buf[:0], iv, buf, aad)
			switch tc.Result {
			case "valid":
				if err != nil || !bytes.Equal(got, msg) {
					t.Errorf("tcId %d (%s): Open = %x, %v; want %x", tc.TcID, tc.Comment, got, err, msg)
				}
				if errInPlace != nil || !bytes.Equal(gotInPlace, msg) {
					t.Errorf("tcId %d (%s): Open in place = %x, %v", tc.TcID, tc.Comment, gotInPlace, errInPlace)
				}
				if s := a.Seal(nil, iv, msg, aad); !bytes.Equal(s, sealed) {
					t.Errorf("tcId %d (%s): Seal = %x, want %x", tc.TcID, tc.Comment, s, sealed)
				}
			default:
				if err == nil || errInPlace == nil {
					t.Errorf("tcId %d (%s, %v): Open accepted an invalid message", tc.TcID, tc.Comment, tc.Flags)
				}
				if got != nil || gotInPlace != nil {
					t.Errorf("tcId %d: Open returned plaintext for an invalid message", tc.TcID)
				}
			}
		}
	}
	if n != f.NumberOfTests {
		t.Errorf("ran %d vectors, the file has %d", n, f.NumberOfTests)
	}
	t.Logf("%d vectors (%d invalid), %d of them through the kernels", n, invalid, inKernel)
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
