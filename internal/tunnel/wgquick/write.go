package wgquick

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Strip returns what `wg-quick strip` prints: the file's lines without the
// wg-quick-only [Interface] keys, verbatim (comments and spacing kept), so
// the result can be fed to `wg setconf`.
func (c *Config) Strip() []byte { return append([]byte(nil), c.stripped...) }

// Marshal renders c in canonical wg-quick form. Parse(Marshal(c)) gives
// back the same configuration.
func (c *Config) Marshal() []byte {
	var b bytes.Buffer
	in := &c.Interface
	b.WriteString("[Interface]\n")
	if in.PrivateKey != nil {
		fmt.Fprintf(&b, "PrivateKey = %s\n", in.PrivateKey.String())
	}
	if in.ListenPort != nil {
		fmt.Fprintf(&b, "ListenPort = %d\n", *in.ListenPort)
	}
	if in.FwMark != nil {
		if *in.FwMark == 0 {
			b.WriteString("FwMark = off\n")
		} else {
			fmt.Fprintf(&b, "FwMark = 0x%x\n", *in.FwMark)
		}
	}
	for _, a := range in.Addresses {
		fmt.Fprintf(&b, "Address = %s\n", a)
	}
	for _, d := range in.DNS {
		fmt.Fprintf(&b, "DNS = %s\n", d)
	}
	if len(in.DNSSearch) > 0 {
		fmt.Fprintf(&b, "DNS = %s\n", strings.Join(in.DNSSearch, ", "))
	}
	if in.MTU != 0 {
		fmt.Fprintf(&b, "MTU = %d\n", in.MTU)
	}
	if in.Table != "" {
		fmt.Fprintf(&b, "Table = %s\n", in.Table)
	}
	if in.SaveConfig {
		b.WriteString("SaveConfig = true\n")
	}
	if in.DNSOptional {
		b.WriteString("# wirelane: DNSOptional = true\n")
	}
	for _, h := range [...]struct {
		key  string
		cmds []string
	}{{"PreUp", in.PreUp}, {"PostUp", in.PostUp}, {"PreDown", in.PreDown}, {"PostDown", in.PostDown}} {
		for _, cmd := range h.cmds {
			fmt.Fprintf(&b, "%s = %s\n", h.key, cmd)
		}
	}
	for i := range c.Peers {
		p := &c.Peers[i]
		b.WriteString("\n[Peer]\n")
		if p.Name != "" {
			fmt.Fprintf(&b, "# Name = %s\n", p.Name)
		}
		fmt.Fprintf(&b, "PublicKey = %s\n", p.PublicKey.String())
		if p.PresharedKey != nil {
			fmt.Fprintf(&b, "PresharedKey = %s\n", p.PresharedKey.String())
		}
		if len(p.AllowedIPs) > 0 {
			s := make([]string, len(p.AllowedIPs))
			for j, a := range p.AllowedIPs {
				s[j] = a.String()
			}
			fmt.Fprintf(&b, "AllowedIPs = %s\n", strings.Join(s, ", "))
		}
		if p.Endpoint != "" {
			fmt.Fprintf(&b, "Endpoint = %s\n", p.Endpoint)
		}
		if p.PersistentKeepalive != nil {
			if *p.PersistentKeepalive == 0 {
				b.WriteString("PersistentKeepalive = off\n")
			} else {
				b.WriteString("PersistentKeepalive = " + strconv.Itoa(int(*p.PersistentKeepalive)) + "\n")
			}
		}
	}
	return b.Bytes()
}
