package wgtunnel

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Keys of the plan tests' peers (public keys only: none is a secret).
const (
	planPriv = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="
	planB    = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
	planC    = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0="
	planD    = "gN65BkIKy1eCE9pP1wdc8ROUtkHLF2PfAqYdyYBz6EA="
	planE    = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
)

// planDevice is a running device: peers B (10.70.0.2), C (10.70.0.3)
// and D (10.70.0.4), port 51000, no fwmark.
func planDevice(t *testing.T) *running {
	t.Helper()
	key := func(s string) wgtypes.Key {
		k, err := wgtypes.ParseKey(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	peer := func(k string, allowed ...string) wgtypes.Peer {
		p := wgtypes.Peer{PublicKey: key(k), Endpoint: &net.UDPAddr{IP: net.IPv4(10, 9, 0, 2).To4(), Port: 51001}}
		for _, a := range allowed {
			p.AllowedIPs = append(p.AllowedIPs, prefixIPNet(netip.MustParsePrefix(a)))
		}
		return p
	}
	dev := &wgtypes.Device{Name: "wlp0", PrivateKey: key(planPriv), ListenPort: 51000, Peers: []wgtypes.Peer{
		peer(planB, "10.70.0.2/32"), peer(planC, "10.70.0.3/32", "10.73.0.0/16"), peer(planD, "10.70.0.4/32"),
	}}
	return &running{
		dev:    dev,
		addrs:  []netip.Prefix{netip.MustParsePrefix("10.70.0.1/24")},
		mtu:    1420,
		routes: []Route{{netip.MustParsePrefix("10.73.0.0/16"), unix.RT_TABLE_MAIN}},
	}
}

func prefixIPNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// planFile is the wg-quick file of planDevice with extra in [Interface]
// and the given [Peer] sections.
func planFile(t *testing.T, extra string, peers ...string) *wgquick.Config {
	t.Helper()
	src := "[Interface]\nPrivateKey = " + planPriv + "\nListenPort = 51000\n" + extra + "\n"
	for _, p := range peers {
		src += "[Peer]\n" + p + "\nEndpoint = 10.9.0.2:51001\n"
	}
	cfg, err := wgquick.Parse("wlp0.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = "wlp0"
	return cfg
}

var (
	peerB = "PublicKey = " + planB + "\nAllowedIPs = 10.70.0.2/32"
	peerC = "PublicKey = " + planC + "\nAllowedIPs = 10.70.0.3/32, 10.73.0.0/16"
	peerD = "PublicKey = " + planD + "\nAllowedIPs = 10.70.0.4/32"
)

func TestPlanReload(t *testing.T) {
	addr := "Address = 10.70.0.1/24"
	for _, tc := range []struct {
		name  string
		file  *wgquick.Config
		mtu   int
		want  []string // the plan's lines, in order
		check func(t *testing.T, p *Plan)
	}{
		{name: "the same file changes nothing", file: planFile(t, addr, peerB, peerC, peerD), want: nil},
		{
			name: "a peer added, one removed, one with new allowed IPs and a new address",
			file: planFile(t, addr+", 10.80.0.1/24", peerB, "PublicKey = "+planD+"\nAllowedIPs = 10.70.0.4/32, 10.74.0.0/24", "PublicKey = "+planE+"\nAllowedIPs = 10.70.0.5/32"),
			want: []string{
				"remove peer " + planC,
				"peer " + planD + ": allowed IPs 10.70.0.4/32 -> 10.70.0.4/32, 10.74.0.0/24 (its session stays)",
				"add peer " + planE + " (allowed IPs 10.70.0.5/32)",
				"add address 10.80.0.1/24",
				"remove route 10.73.0.0/16",
				"add route 10.74.0.0/24",
			},
			check: func(t *testing.T, p *Plan) {
				u := p.UpdatePeers[0].Config
				if !u.UpdateOnly || !u.ReplaceAllowedIPs || u.Endpoint != nil || u.PresharedKey != nil || u.PersistentKeepaliveInterval != nil {
					t.Errorf("update of D = %+v, want update_only with only the allowed IPs", u)
				}
				c, undo, _ := p.peerConfigs()
				if c.ReplacePeers || c.ListenPort != nil || c.PrivateKey != nil || c.FirewallMark != nil {
					t.Errorf("device change %+v touches more than peers", c)
				}
				if len(undo.Peers) != 3 || !undo.Peers[0].Remove || !undo.Peers[2].ReplaceAllowedIPs || len(undo.Peers[2].AllowedIPs) != 2 {
					t.Errorf("inverse %+v: want E removed, D set back, C added back with both prefixes", undo.Peers)
				}
			},
		},
		{
			name: "keepalive, preshared key and endpoint change in place",
			file: planFile(t, addr, peerB+"\nPersistentKeepalive = 25\nPresharedKey = "+planC, peerC, peerD),
			want: []string{"peer " + planB + ": preshared key, persistent keepalive 25 s (its session stays)"},
			check: func(t *testing.T, p *Plan) {
				u := p.UpdatePeers[0].Config
				if u.ReplaceAllowedIPs || u.AllowedIPs != nil || *u.PersistentKeepaliveInterval != 25*time.Second {
					t.Errorf("update %+v", u)
				}
			},
		},
		{
			name: "a new MTU",
			file: planFile(t, addr+"\nMTU = 1380", peerB, peerC, peerD),
			mtu:  1380,
			want: []string{"MTU 1420 -> 1380"},
		},
		{
			name: "a default route gets a fwmark, rules and a firewall",
			file: planFile(t, addr, peerB, peerC, "PublicKey = "+planD+"\nAllowedIPs = 10.70.0.4/32, 0.0.0.0/0"),
			want: []string{
				"peer " + planD + ": allowed IPs 10.70.0.4/32 -> 10.70.0.4/32, 0.0.0.0/0 (its session stays)",
				"fwmark 0 -> 51820",
				"add route 0.0.0.0/0 table 51820",
				"add the default route's policy rules and firewall (IPv4)",
			},
		},
		{
			name: "Table off removes the routes",
			file: planFile(t, addr+"\nTable = off", peerB, peerC, peerD),
			want: []string{"remove route 10.73.0.0/16"},
		},
		{
			name: "a numbered table moves the routes",
			file: planFile(t, addr+"\nTable = 1234", peerB, peerC, peerD),
			want: []string{"remove route 10.73.0.0/16", "add route 10.70.0.2/32 table 1234", "add route 10.70.0.3/32 table 1234", "add route 10.70.0.4/32 table 1234", "add route 10.73.0.0/16 table 1234"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := planDevice(t)
			wcfg, _, err := DeviceConfig(context.Background(), tc.file)
			if err != nil {
				t.Fatal(err)
			}
			in := planInput{cfg: tc.file, wcfg: wcfg, mtu: 1420, freeTable: func() (int, error) { return 51820, nil }}
			if tc.mtu != 0 {
				in.mtu = tc.mtu
			}
			if strings.Contains(tc.name, "numbered") {
				in.table = 1234
			}
			p, err := planReload(run, in)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Lines(); !slices.Equal(got, tc.want) {
				t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if p.Empty() != (len(tc.want) == 0) {
				t.Errorf("Empty() = %v", p.Empty())
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

func TestPlanReloadPrivateKeyAndPort(t *testing.T) {
	run := planDevice(t)
	cfg := planFile(t, "Address = 10.70.0.1/24", peerB, peerC, peerD)
	k, _ := wgquick.ParseKey(planE) // any 32 bytes serve as a private key
	cfg.Interface.PrivateKey = &k
	port := uint16(51002)
	cfg.Interface.ListenPort = &port
	wcfg, _, err := DeviceConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planReload(run, planInput{cfg: cfg, wcfg: wcfg, mtu: 1420})
	if err != nil {
		t.Fatal(err)
	}
	lines := p.Lines()
	if !p.PrivateKey || p.ListenPort != 51002 || len(lines) != 2 || !strings.Contains(lines[0], "every peer's session restarts") || lines[1] != "listen port 51000 -> 51002 (the socket is rebound)" {
		t.Errorf("plan %q", lines)
	}
	c, undo, _ := p.peerConfigs()
	if c.PrivateKey == nil || *c.PrivateKey != wgtypes.Key(k) || undo.PrivateKey == nil || *undo.PrivateKey != run.dev.PrivateKey {
		t.Errorf("key change %v, inverse %v", c.PrivateKey, undo.PrivateKey)
	}
}

func TestPlanReloadDNS(t *testing.T) {
	cfg := planFile(t, "Address = 10.70.0.1/24\nDNS = 10.70.0.53, corp.example", peerB, peerC, peerD)
	wcfg, _, err := DeviceConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := netcfg.DNS{Servers: []netip.Addr{netip.MustParseAddr("10.70.0.53")}, Search: []string{"corp.example."}}
	for _, tc := range []struct {
		name  string
		dns   netcfg.DNS
		known bool
		want  []string
		notes int
	}{
		{"the same settings (a trailing dot aside) change nothing", now, true, nil, 0},
		{"a link without settings gets them", netcfg.DNS{}, true, []string{"DNS (none) -> 10.70.0.53, corp.example"}, 0},
		{"settings that cannot be read are left alone, with a note", netcfg.DNS{}, false, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planReload(planDevice(t), planInput{cfg: cfg, wcfg: wcfg, mtu: 1420, dns: tc.dns, dnsKnown: tc.known, resolver: netcfg.Resolved})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Lines(); !slices.Equal(got, tc.want) || len(p.Notes) != tc.notes {
				t.Errorf("plan %q, notes %q; want %q and %d note(s)", got, p.Notes, tc.want, tc.notes)
			}
		})
	}
}
