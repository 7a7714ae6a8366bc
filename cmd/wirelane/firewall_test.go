package main

// Tests of the nftables firewall `up` installs for a default route (root
// only; every tunnel lives in its own network namespace).

import (
	"strings"
	"testing"

	vnetns "github.com/vishvananda/netns"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// firewallTables reads back, through nftables' netlink API, the families
// in which ns holds wg-quick-IFNAME.
func firewallTables(t *testing.T, ns *tnetns.NS, ifname string) string {
	t.Helper()
	h, err := vnetns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := netcfg.NewAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fams, err := c.FirewallAt(h).FirewallTables(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(fams, ",")
}

// lanNeighbour connects ns to a new namespace through a veth pair (a host
// on the same LAN) that routes the tunnel's addresses to ns, and returns a
// function telling whether a ping from that host to addr is answered.
func lanNeighbour(t *testing.T, ns *tnetns.NS) func(addr string) bool {
	t.Helper()
	peer := tnetns.New(t, "wlfn")
	tnetns.Veth(t, ns, "lan0", peer, "lan1")
	tnetns.Run(t, ns, "ip", "address", "add", "10.1.0.1/24", "dev", "lan0")
	tnetns.Run(t, ns, "ip", "address", "add", "fd01::1/64", "dev", "lan0", "nodad")
	tnetns.Run(t, peer, "ip", "address", "add", "10.1.0.2/24", "dev", "lan1")
	tnetns.Run(t, peer, "ip", "address", "add", "fd01::2/64", "dev", "lan1", "nodad")
	tnetns.Run(t, peer, "ip", "route", "add", "10.77.0.0/16", "via", "10.1.0.1")
	tnetns.Run(t, peer, "ip", "route", "add", "10.78.0.0/16", "via", "10.1.0.1")
	tnetns.Run(t, peer, "ip", "route", "add", "fd77::/64", "via", "fd01::1")
	return func(addr string) bool {
		_, err := tnetns.Try(peer, nil, "ping", "-c", "1", "-W", "1", addr)
		return err == nil
	}
}

// TestFirewallForDefaultRoute brings a full tunnel up: wg-quick's tables
// must exist in both families, a LAN neighbour's pings to the tunnel's
// addresses must go unanswered (while the LAN address still answers), and
// `down` must remove the tables. With WIRELANE_FIREWALL=off the tunnel
// comes up without them, with a warning, and the same pings are answered.
func TestFirewallForDefaultRoute(t *testing.T) {
	env := logDaemon(t)
	tnetns.Need(t, "ping")
	for _, off := range []bool{false, true} {
		name := "firewall on"
		if off {
			name = "WIRELANE_FIREWALL=off"
		}
		t.Run(name, func(t *testing.T) {
			ns := tnetns.New(t, "wlfw")
			answered := lanNeighbour(t, ns)
			ifname := tnetns.Unique("wlfw")
			body, _ := fullTunnelConf(t, "")
			conf := writeConf(t, ifname, body)
			before := netState(t, ns)
			upEnv := env
			if off {
				upEnv = append(append([]string{}, env...), "WIRELANE_FIREWALL=off")
			}
			out, err := tnetns.Try(ns, upEnv, self(t), "up", conf)
			if err != nil {
				t.Fatalf("up: %v\n%s", err, out)
			}
			downDone := false
			defer func() {
				if !downDone {
					wlIn(t, ns, "down", conf)
				}
			}()
			wantTables, warned := "ip,ip6", false
			if off {
				wantTables, warned = "", true
			}
			if got := firewallTables(t, ns, ifname); got != wantTables {
				t.Errorf("firewall tables in families %q, want %q\n%s", got, wantTables, out)
			}
			if got := strings.Contains(out, "Warning: WIRELANE_FIREWALL=off: no nftables firewall for "+ifname); got != warned {
				t.Errorf("warning shown: %v, want %v\n%s", got, warned, out)
			}
			if !off && !strings.Contains(out, `[#] nft add rule ip wg-quick-`+ifname+` preraw iifname != "`+ifname+`" ip daddr 10.77.0.1 fib saddr type != local drop`) {
				t.Errorf("rules not logged:\n%s", out)
			}
			if state := netState(t, ns); !off && strings.Contains(state, "nft ") {
				for _, want := range []string{
					`nft iifname != "` + ifname + `" ip daddr 10.78.0.1 fib saddr type != local drop`,
					`nft iifname != "` + ifname + `" ip6 daddr fd77::1 fib saddr type != local drop`,
					"nft meta l4proto udp meta mark 0x0000ca6c ct mark set meta mark",
					"nft meta l4proto udp meta mark set ct mark",
				} {
					if !strings.Contains(state, want+"\n") {
						t.Errorf("nft ruleset lacks %q:\n%s", want, state)
					}
				}
			}
			for _, a := range []string{"10.77.0.1", "10.78.0.1", "fd77::1"} {
				if got := answered(a); got != off {
					t.Errorf("ping %s from the LAN answered: %v, want %v", a, got, off)
				}
			}
			for _, a := range []string{"10.1.0.1", "fd01::1"} {
				if !answered(a) {
					t.Errorf("the LAN address %s does not answer", a)
				}
			}
			out, err = wlIn(t, ns, "down", conf)
			downDone = true
			if err != nil {
				t.Fatalf("down: %v\n%s", err, out)
			}
			if got := firewallTables(t, ns, ifname); got != "" {
				t.Errorf("tables left after down: %s", got)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("after down:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}

// TestFirewallSetting checks WIRELANE_FIREWALL's values and that only a
// default route with policy routing gets the firewall, as with wg-quick.
func TestFirewallSetting(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlfs")
	priv, _ := genKey(t)
	_, pub := genKey(t)
	before := netState(t, ns)
	for _, tt := range []struct {
		name, iface, allowed, env, wantErr, wantTables string
	}{
		{"a misspelt value is refused before anything changes", "", "0.0.0.0/0", "WIRELANE_FIREWALL=of", `WIRELANE_FIREWALL="of": use "on" or "off"`, ""},
		{"on is the default", "", "0.0.0.0/0", "WIRELANE_FIREWALL=on", "", "ip"},
		{"only the family with a /0", "", "::/0, 10.0.0.0/8", "", "", "ip6"},
		{"no /0, no firewall", "", "10.0.0.0/8, fd00::/8", "", "", ""},
		{"a numbered table gets no policy routing and no firewall", "Table = 1234\n", "0.0.0.0/0, ::/0", "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ifname := tnetns.Unique("wlfs")
			conf := writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\nAddress = 10.12.0.1/24, fd12::1/64\n"+tt.iface+
				"[Peer]\nPublicKey = "+pub+"\nAllowedIPs = "+tt.allowed+"\nEndpoint = 127.0.0.1:51820\n")
			runEnv := env
			if tt.env != "" {
				runEnv = append(append([]string{}, env...), tt.env)
			}
			out, err := tnetns.Try(ns, runEnv, self(t), "up", conf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(out, tt.wantErr) {
					t.Errorf("up: %v, want error %q\n%s", err, tt.wantErr, out)
				}
				if after := netState(t, ns); after != before {
					t.Errorf("state changed:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatalf("up: %v\n%s", err, out)
			}
			got := firewallTables(t, ns, ifname)
			if out, err := wlIn(t, ns, "down", conf); err != nil {
				t.Fatalf("down: %v\n%s", err, out)
			}
			if got != tt.wantTables {
				t.Errorf("tables in families %q, want %q", got, tt.wantTables)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("after down:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}
