package config

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
)

// Every compression option as a file or a push writes it, with the
// framing it puts on the wire and whether it warns (a real algorithm).
func TestCompressFraming(t *testing.T) {
	for _, tc := range []struct {
		line string
		want data.Framing
		alg  bool
	}{
		{"compress", data.FramingSwap, false},
		{"compress stub", data.FramingSwap, false},
		{"compress lz4", data.FramingSwap, true},
		{"compress stub-v2", data.FramingV2, false},
		{"compress lz4-v2", data.FramingV2, true},
		{"compress LZ4-V2", data.FramingV2, true},
		{"compress lzo", data.FramingLZO, true},
		{"comp-lzo", data.FramingLZO, true},
		{"comp-lzo yes", data.FramingLZO, true},
		{"comp-lzo adaptive", data.FramingLZO, true},
		{"comp-lzo no", data.FramingLZO, false},
	} {
		f, alg, err := CompressFraming(strings.Fields(tc.line))
		if err != nil || f != tc.want || alg != tc.alg {
			t.Errorf("%q: %v %v %v, want %v %v", tc.line, f, alg, err, tc.want, tc.alg)
		}
		cfg, err := Parse([]byte("client\nremote h\nauth-user-pass\n<ca>\n"+pem+"</ca>\n"+tc.line+"\n"), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if cfg.Compress != tc.want || cfg.CompressDirective != tc.line {
			t.Errorf("%q: Compress %v %q", tc.line, cfg.Compress, cfg.CompressDirective)
		}
		warned := false
		for _, w := range cfg.Warnings {
			warned = warned || strings.Contains(w.String(), "never compresses")
		}
		if warned != tc.alg {
			t.Errorf("%q: warned %v, want %v (%v)", tc.line, warned, tc.alg, cfg.Warnings)
		}
	}
	for _, bad := range []string{"compress lz4 extra", "compress zstd", "comp-lzo yes no", "compress migrate", "route x"} {
		if _, _, err := CompressFraming(strings.Fields(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// allow-compression with and without compress lines settles as OpenVPN
// 2.6.14 does (each row checked against `openvpn --allow-compression ...
// --compress ...`): no line at all, or comp-lzo no, allows stubs only;
// a line naming an algorithm without allow-compression is asym
// (decompress, never compress); yes is asym with one warning; no with an
// algorithm, in either order, is an error at the later line, as is
// setting it to anything else after no.
func TestAllowCompression(t *testing.T) {
	base := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	first := strings.Count(base, "\n") + 1
	for _, tc := range []struct {
		lines                        string
		stubOnly, decompress, advert bool
		yesWarnings                  int
	}{
		{"", true, false, false, 0},
		{"comp-lzo no\n", true, false, false, 0},
		{"compress lz4-v2\n", false, true, true, 0},
		{"comp-lzo\n", false, true, true, 0},
		{"comp-lzo yes\n", false, true, true, 0},
		{"compress lzo\n", false, true, true, 0},
		{"compress stub-v2\n", false, false, false, 0}, // a pushed algorithm is accepted
		{"compress\n", false, false, false, 0},
		{"allow-compression asym\n", false, false, true, 0},
		{"compress lz4-v2\nallow-compression asym\n", false, true, true, 0},
		{"compress lz4-v2\nallow-compression yes\n", false, true, true, 1},
		{"allow-compression yes\ncomp-lzo yes\nallow-compression yes\n", false, true, true, 1},
		{"compress stub-v2\nallow-compression asym\n", false, false, false, 0}, // a stub drops what it gets
		{"allow-compression no\n", true, false, false, 0},
		{"allow-compression no\ncompress stub-v2\n", true, false, false, 0},
		{"allow-compression no\ncomp-lzo no\n", true, false, false, 0},
		{"allow-compression asym\nallow-compression no\n", true, false, false, 0},
		{"compress lz4-v2\ncomp-lzo no\n", true, false, false, 0},      // the line in force is a stub
		{"compress stub\ncomp-lzo no\n", false, false, false, 0},       // a stub line sets a flag for good
		{"compress stub-v2\ncompress lz4-v2\n", false, true, false, 0}, // and keeps announcing stubs only
	} {
		cfg, err := Parse([]byte(base+tc.lines), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.lines, err)
		}
		yes := 0
		for _, w := range cfg.Warnings {
			if w.Directive == "allow-compression" && strings.Contains(w.Message, "treated as asym") {
				yes++
			}
		}
		if cfg.StubOnly() != tc.stubOnly || cfg.Decompresses() != tc.decompress || cfg.AdvertisesAlgorithms() != tc.advert || yes != tc.yesWarnings {
			t.Errorf("%q: stub only %v, decompresses %v, advertises %v, %d yes warnings; want %v %v %v %d",
				tc.lines, cfg.StubOnly(), cfg.Decompresses(), cfg.AdvertisesAlgorithms(), yes, tc.stubOnly, tc.decompress, tc.advert, tc.yesWarnings)
		}
	}
	for _, bad := range []struct {
		lines, want string
		line        int // of the error, counted from the first line after base
	}{
		{"allow-compression\n", "", 0},
		{"allow-compression maybe\n", "want no, asym or yes", 0},
		{"allow-compression no yes\n", "", 0},
		{"compress lz4\nallow-compression no\n", "conflicts with", 1},
		{"comp-lzo\nallow-compression no\n", "conflicts with", 1},
		{"allow-compression no\ncompress lz4-v2\n", "compression is not allowed", 1},
		{"allow-compression no\ncomp-lzo yes\n", "compression is not allowed", 1},
		{"allow-compression no\nallow-compression yes\n", "after setting it to no", 1},
		{"allow-compression no\nallow-compression asym\n", "after setting it to no", 1},
	} {
		_, err := Parse([]byte(base+bad.lines), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "x.ovpn:"+strconv.Itoa(first+bad.line)+":") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v", bad.lines, err)
		}
	}
}

// compat-mode as OpenVPN 2.6.14 applies it: before 2.6.0 no stubs-only
// default (a pushed algorithm is taken, asym); before 2.5.0 `cipher` is
// appended to data-ciphers (the default list when there is none); before
// 2.4.0 it is data-ciphers-fallback too; 2.3.6 or older is warned about
// (no TLS 1.0). Versions OpenVPN cannot parse are errors at their line.
func TestCompatMode(t *testing.T) {
	base := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	for _, tc := range []struct {
		lines    string
		stubOnly bool
		ciphers  []data.Cipher
		fallback data.Cipher
		tlsWarn  bool
	}{
		{"cipher AES-256-CBC\n", true, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}, 0, false},
		{"compat-mode 2.6.0\ncipher AES-256-CBC\n", true, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}, 0, false},
		{"compat-mode 2.5.9\ncipher AES-256-CBC\n", false, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}, 0, false},
		{"compat-mode 2.4.12\ncipher AES-256-CBC\n", false, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305, data.AES256CBC}, 0, false},
		{"cipher AES-128-CBC\ndata-ciphers AES-256-GCM\ncompat-mode 2.3.18\n", false, []data.Cipher{data.AES256GCM, data.AES128CBC}, data.AES128CBC, false},
		{"compat-mode 2.3.0\ncipher AES-256-CBC\ndata-ciphers-fallback AES-128-CBC\n", false, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305, data.AES256CBC}, data.AES128CBC, true},
		{"compat-mode 2.3.0\ncompress stub-v2\nallow-compression no\n", true, []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}, 0, true},
	} {
		cfg, err := Parse([]byte(base+tc.lines), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.lines, err)
		}
		tlsWarn := false
		for _, w := range cfg.Warnings {
			tlsWarn = tlsWarn || w.Directive == "compat-mode" && strings.Contains(w.Message, "TLS 1.0")
		}
		if cfg.StubOnly() != tc.stubOnly || !slices.Equal(cfg.DataCiphers, tc.ciphers) || cfg.DataCiphersFallback != tc.fallback || tlsWarn != tc.tlsWarn {
			t.Errorf("%q: stub only %v, data-ciphers %v, fallback %v, TLS warning %v", tc.lines, cfg.StubOnly(), cfg.DataCiphers, cfg.DataCiphersFallback, tlsWarn)
		}
	}
	for _, bad := range []string{"compat-mode", "compat-mode 2.3", "compat-mode 2.3.x", "compat-mode 2.3.0 2.4.0", "compat-mode -2.3.0"} {
		if _, err := Parse([]byte(base+bad+"\n"), "x.ovpn", ""); err == nil || !strings.Contains(err.Error(), "x.ovpn:"+strconv.Itoa(strings.Count(base, "\n")+1)+":") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
