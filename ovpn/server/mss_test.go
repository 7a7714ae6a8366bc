package server

import (
	"testing"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/data"
)

// Without an mssfix line the server clamps as OpenVPN 2.6: 1492 mtu, or
// the TUN MTU (fixed) when tun-mtu is not 1500; a line always wins.
func TestServerMSSFixDefault(t *testing.T) {
	set := func(m data.MSSFix) config.Common { return config.Common{MSSFix: m, MSSFixSet: true} }
	for _, tc := range []struct {
		cfg  Config
		want data.MSSFix
	}{
		{Config{MTU: 1500}, data.DefaultMSSFix},
		{Config{}, data.DefaultMSSFix},
		{Config{MTU: 9000}, data.MSSFix{Max: 9000, Fixed: true}},
		{Config{MTU: 1400}, data.MSSFix{Max: 1400, Fixed: true}},
		{Config{MTU: 9000, Common: set(data.MSSFix{Max: 1280, Encap: true})}, data.MSSFix{Max: 1280, Encap: true}},
		{Config{MTU: 1500, Common: set(data.MSSFix{})}, data.MSSFix{}},
	} {
		if got := tc.cfg.mssFix(); got != tc.want {
			t.Errorf("tun-mtu %d, mssfix %+v (set %v): %+v, want %+v", tc.cfg.MTU, tc.cfg.MSSFix, tc.cfg.MSSFixSet, got, tc.want)
		}
	}
}
