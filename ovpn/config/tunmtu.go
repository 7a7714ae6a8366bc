package config

// The client's tun-mtu, as OpenVPN 2.6 parses it: `tun-mtu N [OCC-MTU]`,
// the TUN device's MTU (the optional second number is only what the
// options string announces, to quiet a peer's mismatch warning, and is
// ignored here). OpenVPN refuses an MTU below 100 (TUN_MTU_MIN); Linux
// caps a device at 65535.

import "github.com/wirelane/wirelane/ovpn/data"

// TunMTUMin and TunMTUMax bound tun-mtu in a client file.
const (
	TunMTUMin = 100
	TunMTUMax = 65535
)

// tunMTU handles tun-mtu into Config.TunMTU.
func (e *clientExt) tunMTU(p *Parser, args []string) error {
	if err := p.Want(args, 1, 2); err != nil {
		return err
	}
	v, err := p.Number(args[0], args[1], 1<<30)
	if err != nil {
		return err
	}
	if v < TunMTUMin || v > TunMTUMax {
		return p.Errorf(args[0], "MTU %d out of range %d to %d", v, TunMTUMin, TunMTUMax)
	}
	if len(args) == 3 {
		if _, err := p.Number(args[0], args[2], TunMTUMax); err != nil {
			return err
		}
	}
	e.cfg.TunMTU = v
	return nil
}

// ClientMSS is the mssfix in force on a client: the file's mssfix, or
// without one OpenVPN 2.6's default, which is `mssfix 1492 mtu` or, with
// a tun-mtu other than 1500 in the file, `mssfix TUN-MTU fixed` (as the
// server's, ovpn/server/mss.go).
func (c *Config) ClientMSS() data.MSSFix {
	if !c.MSSFixSet && c.TunMTU != 0 && c.TunMTU != 1500 {
		return data.MSSFix{Max: c.TunMTU, Fixed: true}
	}
	return c.MSS()
}
