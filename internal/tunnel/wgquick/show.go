package wgquick

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// This file renders a device's state the way `wg show` does (FormatDevice)
// and as the stable JSON document `wirelane show --json` prints (ShowJSON).

// FormatBytes renders a byte count as `wg show` does: "512 B",
// "1.20 MiB" (binary units, two decimals from KiB up).
func FormatBytes(b uint64) string {
	const k = 1024
	switch {
	case b < k:
		return fmt.Sprintf("%d B", b)
	case b < k*k:
		return fmt.Sprintf("%.2f KiB", float64(b)/k)
	case b < k*k*k:
		return fmt.Sprintf("%.2f MiB", float64(b)/(k*k))
	case b < k*k*k*k:
		return fmt.Sprintf("%.2f GiB", float64(b)/(k*k*k))
	default:
		return fmt.Sprintf("%.2f TiB", float64(b)/(k*k*k*k))
	}
}

// FormatDuration renders whole seconds as `wg show` does:
// "1 year, 2 days, 1 minute, 5 seconds" (zero parts left out).
func FormatDuration(secs uint64) string {
	parts := []struct {
		n    uint64
		unit string
	}{
		{secs / (365 * 86400), "year"},
		{secs % (365 * 86400) / 86400, "day"},
		{secs % 86400 / 3600, "hour"},
		{secs % 3600 / 60, "minute"},
		{secs % 60, "second"},
	}
	var out []string
	for _, p := range parts {
		if p.n == 0 {
			continue
		}
		s := fmt.Sprintf("%d %s", p.n, p.unit)
		if p.n != 1 {
			s += "s"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// FormatAgo renders the age of t at now: "Now", "1 minute, 5 seconds ago",
// or a warning when t lies in the future.
func FormatAgo(t, now time.Time) string {
	ts, ns := t.Unix(), now.Unix()
	switch {
	case ts == ns:
		return "Now"
	case ns < ts:
		return "(System clock wound backward; connection problems may ensue.)"
	}
	return FormatDuration(uint64(ns-ts)) + " ago"
}

// handshakeNever reports whether t means "no handshake yet" (the protocol
// sends zero seconds for that).
func handshakeNever(t time.Time) bool { return t.IsZero() || t.Unix() == 0 }

// SortPeers orders peers as `wg show` lists them: latest handshake first.
func SortPeers(peers []wgtypes.Peer) []wgtypes.Peer {
	out := append([]wgtypes.Peer(nil), peers...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].LastHandshakeTime, out[j].LastHandshakeTime
		if handshakeNever(a) {
			return false
		}
		if handshakeNever(b) {
			return true
		}
		return a.After(b)
	})
	return out
}

func endpointString(a *net.UDPAddr) string {
	if a == nil {
		return ""
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return ""
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port)).String()
}

// FormatDevice writes the human view of one device, as `wg show NAME` does
// (private and preshared keys shown as "(hidden)").
func FormatDevice(w io.Writer, d *wgtypes.Device, now time.Time) error {
	return FormatDeviceNamed(w, d, nil, now)
}

// FormatDeviceNamed is FormatDevice with the peers' friendly names (by
// public key; "# Name = ..." in the file) shown under their keys.
func FormatDeviceNamed(w io.Writer, d *wgtypes.Device, names map[wgtypes.Key]string, now time.Time) error {
	return FormatDeviceLines(w, d, names, nil, now)
}

// FormatDeviceLines is FormatDeviceNamed with more lines in the interface's
// section, after its own (the service's engine counters: "dropped:
// malformed 20"), each indented as the others.
func FormatDeviceLines(w io.Writer, d *wgtypes.Device, names map[wgtypes.Key]string, lines []string, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "interface: %s\n", d.Name)
	if d.PrivateKey != (wgtypes.Key{}) {
		fmt.Fprintf(&b, "  public key: %s\n", d.PublicKey)
		b.WriteString("  private key: (hidden)\n")
	}
	if d.ListenPort != 0 {
		fmt.Fprintf(&b, "  listening port: %d\n", d.ListenPort)
	}
	if d.FirewallMark != 0 {
		fmt.Fprintf(&b, "  fwmark: 0x%x\n", d.FirewallMark)
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, p := range SortPeers(d.Peers) {
		fmt.Fprintf(&b, "\npeer: %s\n", p.PublicKey)
		if n := names[p.PublicKey]; n != "" {
			fmt.Fprintf(&b, "  name: %s\n", n)
		}
		if p.PresharedKey != (wgtypes.Key{}) {
			b.WriteString("  preshared key: (hidden)\n")
		}
		if ep := endpointString(p.Endpoint); ep != "" {
			fmt.Fprintf(&b, "  endpoint: %s\n", ep)
		}
		b.WriteString("  allowed ips: ")
		if len(p.AllowedIPs) == 0 {
			b.WriteString("(none)")
		}
		for i, a := range p.AllowedIPs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.String())
		}
		b.WriteByte('\n')
		if !handshakeNever(p.LastHandshakeTime) {
			fmt.Fprintf(&b, "  latest handshake: %s\n", FormatAgo(p.LastHandshakeTime, now))
		}
		if p.ReceiveBytes != 0 || p.TransmitBytes != 0 {
			fmt.Fprintf(&b, "  transfer: %s received, %s sent\n", FormatBytes(uint64(p.ReceiveBytes)), FormatBytes(uint64(p.TransmitBytes)))
		}
		if p.PersistentKeepaliveInterval > 0 {
			fmt.Fprintf(&b, "  persistent keepalive: every %s\n", FormatDuration(uint64(p.PersistentKeepaliveInterval/time.Second)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ShowJSON is the document `wirelane show --json` prints. The schema is
// stable: fields are only ever added, never renamed or removed.
//
//	{
//	  "schema": 1,
//	  "interfaces": [{
//	    "name": "wg0",
//	    "public_key": "base64" | "",        // "" when no private key is set
//	    "listen_port": 51820,
//	    "fwmark": 0,
//	    "peers": [{
//	      "public_key": "base64",
//	      "has_preshared_key": false,
//	      "endpoint": "192.0.2.1:51820" | "",   // "[v6]:port" for IPv6
//	      "allowed_ips": ["10.0.0.2/32"],
//	      "latest_handshake": "2026-01-02T15:04:05Z" | null,
//	      "latest_handshake_unix": 1767366245 | 0,   // 0 = never
//	      "rx_bytes": 0,
//	      "tx_bytes": 0,
//	      "persistent_keepalive": 25,                 // seconds, 0 = off
//	      "name": "laptop"                            // absent when unknown
//	    }]
//	  }]
//	}
//
// Private and preshared keys never appear.
type ShowJSON struct {
	Schema     int             `json:"schema"`
	Interfaces []InterfaceJSON `json:"interfaces"`
}

// InterfaceJSON is one interface of ShowJSON.
type InterfaceJSON struct {
	Name       string     `json:"name"`
	PublicKey  string     `json:"public_key"`
	ListenPort int        `json:"listen_port"`
	FwMark     int        `json:"fwmark"`
	Peers      []PeerJSON `json:"peers"`
}

// PeerJSON is one peer of InterfaceJSON.
type PeerJSON struct {
	PublicKey           string     `json:"public_key"`
	HasPresharedKey     bool       `json:"has_preshared_key"`
	Endpoint            string     `json:"endpoint"`
	AllowedIPs          []string   `json:"allowed_ips"`
	LatestHandshake     *time.Time `json:"latest_handshake"`
	LatestHandshakeUnix int64      `json:"latest_handshake_unix"`
	RxBytes             int64      `json:"rx_bytes"`
	TxBytes             int64      `json:"tx_bytes"`
	PersistentKeepalive int        `json:"persistent_keepalive"`
	// Name is the friendly name, when one is known (absent otherwise).
	Name string `json:"name,omitempty"`
}

// ShowJSONSchema is the current value of ShowJSON.Schema.
const ShowJSONSchema = 1

// DeviceJSON converts one device to its JSON form.
func DeviceJSON(d *wgtypes.Device) InterfaceJSON { return DeviceJSONNamed(d, nil) }

// DeviceJSONNamed is DeviceJSON with the peers' friendly names.
func DeviceJSONNamed(d *wgtypes.Device, names map[wgtypes.Key]string) InterfaceJSON {
	j := InterfaceJSON{Name: d.Name, ListenPort: d.ListenPort, FwMark: d.FirewallMark, Peers: []PeerJSON{}}
	if d.PrivateKey != (wgtypes.Key{}) {
		j.PublicKey = d.PublicKey.String()
	}
	for _, p := range SortPeers(d.Peers) {
		pj := PeerJSON{
			PublicKey:           p.PublicKey.String(),
			HasPresharedKey:     p.PresharedKey != (wgtypes.Key{}),
			Endpoint:            endpointString(p.Endpoint),
			AllowedIPs:          []string{},
			RxBytes:             p.ReceiveBytes,
			TxBytes:             p.TransmitBytes,
			PersistentKeepalive: int(p.PersistentKeepaliveInterval / time.Second),
			Name:                names[p.PublicKey],
		}
		for _, a := range p.AllowedIPs {
			pj.AllowedIPs = append(pj.AllowedIPs, a.String())
		}
		if !handshakeNever(p.LastHandshakeTime) {
			t := p.LastHandshakeTime.UTC()
			pj.LatestHandshake = &t
			pj.LatestHandshakeUnix = t.Unix()
		}
		j.Peers = append(j.Peers, pj)
	}
	return j
}

// WriteJSON writes devices as one indented ShowJSON document.
func WriteJSON(w io.Writer, devs []*wgtypes.Device) error {
	doc := ShowJSON{Schema: ShowJSONSchema, Interfaces: []InterfaceJSON{}}
	for _, d := range devs {
		doc.Interfaces = append(doc.Interfaces, DeviceJSON(d))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
