package config

import (
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
