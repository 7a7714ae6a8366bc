package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
)

// tun-mtu in a client file: its value (the occ-mtu form too), OpenVPN's
// range with FILE:LINE errors outside it, and the mssfix default it
// implies without an mssfix line.
func TestClientTunMTU(t *testing.T) {
	head := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	for _, tc := range []struct {
		lines string
		mtu   int
		mss   data.MSSFix
	}{
		{"", 0, data.DefaultMSSFix},
		{"tun-mtu 1500", 1500, data.DefaultMSSFix},
		{"tun-mtu 1400", 1400, data.MSSFix{Max: 1400, Fixed: true}},
		{"tun-mtu 1400 1500", 1400, data.MSSFix{Max: 1400, Fixed: true}},
		{"tun-mtu 100", 100, data.MSSFix{Max: 100, Fixed: true}},
		{"tun-mtu 9000\nmssfix 1280 mtu", 9000, data.MSSFix{Max: 1280, Encap: true}},
		{"tun-mtu 1400\nmssfix 0", 1400, data.MSSFix{}},
	} {
		cfg, err := Parse([]byte(head+tc.lines+"\n"), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.lines, err)
		}
		if cfg.TunMTU != tc.mtu || cfg.ClientMSS() != tc.mss {
			t.Errorf("%q: TunMTU %d, ClientMSS %+v; want %d, %+v", tc.lines, cfg.TunMTU, cfg.ClientMSS(), tc.mtu, tc.mss)
		}
		for _, w := range cfg.Warnings {
			if w.Directive == "tun-mtu" {
				t.Errorf("%q: warned %v", tc.lines, w)
			}
		}
	}
	line := strings.Count(head, "\n") + 1
	for _, tc := range []struct{ bad, want string }{
		{"tun-mtu 99", "MTU 99 out of range 100 to 65535"},
		{"tun-mtu 65536", "MTU 65536 out of range 100 to 65535"},
		{"tun-mtu x", `bad number "x"`},
		{"tun-mtu", "tun-mtu"},
		{"tun-mtu 1400 y", `bad number "y"`},
		{"tun-mtu 1400 1500 1", "tun-mtu"},
	} {
		_, err := Parse([]byte(head+tc.bad+"\n"), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "x.ovpn:"+strconv.Itoa(line)+": tun-mtu") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want x.ovpn:%d: ... %s", tc.bad, err, line, tc.want)
		}
	}
}
