package config

// mssfix, shared by client and server files: TCP MSS clamping on the data
// channel (ovpn/data's mss.go), as OpenVPN 2.6 parses it.
//
//	mssfix             the default (1492 mtu)
//	mssfix N           N bytes of UDP payload (OpenVPN 2.5's meaning)
//	mssfix N mtu       N bytes including the IP and UDP (or TCP) headers
//	mssfix N fixed     inner IP packets of at most N bytes
//	mssfix 0           off

import "github.com/wirelane/wirelane/ovpn/data"

// mssfixMin is the smallest mssfix accepted besides 0: the datagram size
// every IPv4 host must accept.
const mssfixMin = 576

// mssfix handles the mssfix directive into Common.MSSFix. It reports
// whether args[0] was mssfix.
func (p *Parser) mssfix(args []string) (bool, error) {
	if args[0] != "mssfix" {
		return false, nil
	}
	if err := p.Want(args, 0, 2); err != nil {
		return true, err
	}
	m := data.DefaultMSSFix
	if len(args) > 1 {
		v, err := p.Number(args[0], args[1], 65535)
		if err != nil {
			return true, err
		}
		if v != 0 && v < mssfixMin {
			return true, p.Errorf(args[0], "%d is below %d (use 0 to turn MSS clamping off)", v, mssfixMin)
		}
		m = data.MSSFix{Max: v}
		if len(args) == 3 {
			switch args[2] {
			case "mtu":
				m.Encap = true
			case "fixed":
				m.Fixed = true
			default:
				return true, p.Errorf(args[0], "want mtu or fixed after the size, got %q", args[2])
			}
		}
	}
	p.c.MSSFix, p.c.MSSFixSet = m, true
	return true, nil
}

// MSS is the file's mssfix, or OpenVPN 2.6's default (mssfix 1492 mtu)
// when it has none.
func (c *Common) MSS() data.MSSFix {
	if !c.MSSFixSet {
		return data.DefaultMSSFix
	}
	return c.MSSFix
}
