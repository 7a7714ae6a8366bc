package ovpntunnel

// The client's TUN MTU: --mtu when given, else a tun-mtu the server
// pushed, else the file's tun-mtu, else 1500. As OpenVPN 2.6, the client
// announces IV_MTU (the largest pushed MTU it applies: its tun-mtu-max,
// 1600, or the file's tun-mtu if larger) and caps a larger pushed value
// to it. With --mtu nothing is announced and a pushed tun-mtu is not
// applied. The MTU is chosen once, when the device is created; a
// reconnect that is pushed another one keeps the device's.

import (
	"cmp"
	"fmt"

	"github.com/wirelane/wirelane/ovpn/config"
)

// defaultMTU is OpenVPN's tun-mtu default; pushMTUMax its tun-mtu-max.
const (
	defaultMTU = 1500
	pushMTUMax = 1600
)

// pushMTULimit is the largest pushed tun-mtu applied (announced as
// IV_MTU), 0 when none is (flag: --mtu, 0 when not given).
func pushMTULimit(flag int, cfg *config.Config) int {
	if flag != 0 {
		return 0
	}
	return max(pushMTUMax, cfg.TunMTU)
}

// tunMTU is the MTU of the device for --mtu flag (0: not given), the
// file cfg and a pushed tun-mtu (0: none), with a line for the user when
// the pushed one decided, was capped or was overridden ("" otherwise).
func tunMTU(flag int, cfg *config.Config, pushed int) (int, string) {
	if flag != 0 {
		if pushed != 0 && pushed != flag {
			return flag, fmt.Sprintf("pushed tun-mtu %d not applied: --mtu %d", pushed, flag)
		}
		return flag, ""
	}
	own := cmp.Or(cfg.TunMTU, defaultMTU)
	switch lim := pushMTULimit(flag, cfg); {
	case pushed == 0 || pushed == own:
		return own, ""
	case pushed > lim:
		return lim, fmt.Sprintf("pushed tun-mtu %d capped to %d (OpenVPN's tun-mtu-max)", pushed, lim)
	}
	return pushed, fmt.Sprintf("mtu %d pushed by the server", pushed)
}
