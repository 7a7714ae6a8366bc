package config

import (
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
)

// mssfix in each of its forms, and the default without it.
func TestMSSFix(t *testing.T) {
	for _, tc := range []struct {
		line string
		want data.MSSFix
	}{
		{"", data.DefaultMSSFix},
		{"mssfix", data.DefaultMSSFix},
		{"mssfix 1450", data.MSSFix{Max: 1450}},
		{"mssfix 1280 mtu", data.MSSFix{Max: 1280, Encap: true}},
		{"mssfix 1400 fixed", data.MSSFix{Max: 1400, Fixed: true}},
		{"mssfix 0", data.MSSFix{}},
	} {
		cfg, err := Parse([]byte("client\nremote h\nauth-user-pass\n<ca>\n"+pem+"</ca>\n"+tc.line+"\n"), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if got := cfg.MSS(); got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.line, got, tc.want)
		}
		for _, w := range cfg.Warnings {
			if w.Directive == "mssfix" {
				t.Errorf("%q: warned %v", tc.line, w)
			}
		}
	}
	for _, bad := range []string{"mssfix 100", "mssfix 1400 big", "mssfix x", "mssfix 1400 mtu x", "mssfix 70000"} {
		_, err := Parse([]byte("client\nremote h\nauth-user-pass\n<ca>\n"+pem+"</ca>\n"+bad+"\n"), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "x.ovpn:") || !strings.Contains(err.Error(), "mssfix") {
			t.Errorf("%q: %v, want an error at its line", bad, err)
		}
	}
}
