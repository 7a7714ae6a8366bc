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

// allow-compression is accepted in every mode; asym and yes decompress
// (no, and no line at all, do not), and yes warns that it is treated as
// asym.
func TestAllowCompression(t *testing.T) {
	for mode, warns := range map[string]bool{"no": false, "asym": false, "yes": true} {
		cfg, err := Parse([]byte("client\nremote h\nauth-user-pass\n<ca>\n"+pem+"</ca>\ncompress lz4-v2\nallow-compression "+mode+"\n"), "x.ovpn", "")
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, w := range cfg.Warnings {
			warned = warned || w.Directive == "allow-compression"
		}
		if cfg.AllowCompression != mode || warned != warns {
			t.Errorf("%s: %q warned %v", mode, cfg.AllowCompression, warned)
		}
		if cfg.Decompresses() != (mode != "no") {
			t.Errorf("%s: Decompresses %v", mode, cfg.Decompresses())
		}
		if warns && !strings.Contains(cfg.Warnings[len(cfg.Warnings)-1].Message, "treated as asym") {
			t.Errorf("%s: warning %v", mode, cfg.Warnings)
		}
	}
	base := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	cfg, err := Parse([]byte(base+"comp-lzo yes\n"), "x.ovpn", "")
	if err != nil || cfg.Decompresses() {
		t.Fatalf("default: %v, decompresses %v", err, cfg != nil && cfg.Decompresses())
	}
	for _, bad := range []string{"allow-compression", "allow-compression maybe", "allow-compression no yes"} {
		if _, err := Parse([]byte(base+bad+"\n"), "x.ovpn", ""); err == nil || !strings.Contains(err.Error(), "x.ovpn:"+strconv.Itoa(strings.Count(base, "\n")+1)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
