package netcfg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// namedNS creates a namespace reachable with `ip netns exec` (for nft and
// ping) and returns a Conf and Firewall working in it.
func namedNS(t *testing.T, prefix string) (*tnetns.NS, *Conf, *Firewall, vnetns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and nftables tables in them")
	}
	tnetns.Need(t)
	ns := tnetns.New(t, prefix)
	h, err := vnetns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c, err := NewAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return ns, c, c.FirewallAt(h), h
}

// describe renders rule expressions in a short form written for these
// tests (not by the code under test), so expectations read as text.
func describe(t *testing.T, es []expr.Any) string {
	t.Helper()
	var parts []string
	for _, e := range es {
		switch e := e.(type) {
		case *expr.Meta:
			dir := "load"
			if e.SourceRegister {
				dir = "set"
			}
			parts = append(parts, fmt.Sprintf("meta %s %d", dir, e.Key))
		case *expr.Cmp:
			op := map[expr.CmpOp]string{expr.CmpOpEq: "==", expr.CmpOpNeq: "!="}[e.Op]
			parts = append(parts, fmt.Sprintf("%s %x", op, e.Data))
		case *expr.Payload:
			parts = append(parts, fmt.Sprintf("network header @%d len %d", e.Offset, e.Len))
		case *expr.Fib:
			parts = append(parts, fmt.Sprintf("fib saddr %v type %v", e.FlagSADDR, e.ResultADDRTYPE))
		case *expr.Ct:
			// The library decodes only a destination register when
			// reading rules back: a ct expression without one sets.
			dir := "load"
			if e.SourceRegister || e.Register == 0 {
				dir = "set"
			}
			parts = append(parts, fmt.Sprintf("ct %s %d", dir, e.Key))
		case *expr.Verdict:
			parts = append(parts, fmt.Sprintf("verdict %d", e.Kind))
		default:
			parts = append(parts, fmt.Sprintf("%T", e))
		}
	}
	return strings.Join(parts, "; ")
}

// readBack lists the firewall tables of the namespace with their chains
// and rules, through the nftables library.
func readBack(t *testing.T, h vnetns.NsHandle) map[string]string {
	t.Helper()
	cc, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := cc.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tb := range tables {
		chains, err := cc.ListChainsOfTableFamily(tb.Family)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, ch := range chains {
			if ch.Table.Name != tb.Name {
				continue
			}
			fmt.Fprintf(&b, "chain %s type %s hook %d priority %d\n", ch.Name, ch.Type, *ch.Hooknum, *ch.Priority)
			rules, err := cc.GetRules(tb, ch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rules {
				fmt.Fprintf(&b, "  %s\n", describe(t, r.Exprs))
			}
		}
		out[fmt.Sprintf("%d %s", tb.Family, tb.Name)] = b.String()
	}
	return out
}

func setUpTunnelLink(t *testing.T, ns *tnetns.NS, name string, addrs ...string) {
	t.Helper()
	tnetns.Run(t, ns, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
	for _, a := range addrs {
		tnetns.Run(t, ns, "ip", "address", "add", a, "dev", name, "nodad")
	}
	tnetns.Run(t, ns, "ip", "link", "set", name, "up")
	tnetns.Run(t, ns, "ip", "link", "set", name+"p", "up")
}

func TestAntiSpoofingTablesReadBack(t *testing.T) {
	ns, c, fw, h := namedNS(t, "wlnft")
	setUpTunnelLink(t, ns, "wgt0", "10.5.0.1/24", "10.6.0.1/32", "fd05::1/64")
	var logged []string
	c.Log = func(s string) { logged = append(logged, s) }
	if err := fw.AddAntiSpoofing(unix.AF_INET, "wgt0", 51820); err != nil {
		t.Fatal(err)
	}
	if err := fw.AddAntiSpoofing(unix.AF_INET6, "wgt0", 51820); err != nil {
		t.Fatal(err)
	}
	name := "77677430" + strings.Repeat("00", 12) // "wgt0", zero-padded to IFNAMSIZ
	mark := fmt.Sprintf("%x", binary.NativeEndian.AppendUint32(nil, 51820))
	local := fmt.Sprintf("%x", binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL))
	mangle := fmt.Sprintf("chain premangle type filter hook 0 priority -150\n"+
		"  meta load 16; == 11; ct load 3; meta set 3\n"+
		"chain postmangle type filter hook 4 priority -150\n"+
		"  meta load 16; == 11; meta load 3; == %s; meta load 3; ct set 3\n", mark)
	drop := func(off, n int, addr string) string {
		return fmt.Sprintf("  meta load 6; != %s; network header @%d len %d; == %s; fib saddr true type true; != %s; verdict 0\n", name, off, n, addr, local)
	}
	want := map[string]string{
		"2 wg-quick-wgt0": "chain preraw type filter hook 0 priority -300\n" +
			drop(16, 4, "0a050001") + drop(16, 4, "0a060001") + mangle,
		"10 wg-quick-wgt0": "chain preraw type filter hook 0 priority -300\n" +
			drop(24, 16, "fd050000000000000000000000000001") + mangle,
	}
	got := readBack(t, h)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("table %s:\n%s\nwant:\n%s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("tables: %v", got)
	}
	if fams, err := fw.FirewallTables("wgt0"); err != nil || strings.Join(fams, ",") != "ip,ip6" {
		t.Errorf("FirewallTables = %v, %v", fams, err)
	}
	if l := strings.Join(logged, "\n"); !strings.Contains(l, `nft add rule ip6 wg-quick-wgt0 preraw iifname != "wgt0" ip6 daddr fd05::1 fib saddr type != local drop`) {
		t.Errorf("log:\n%s", l)
	}

	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, h); len(got) != 0 {
		t.Errorf("tables left after undo: %v", got)
	}
}

// TestAntiSpoofingSameAsWGQuick feeds wg-quick's nft script (as its
// add_default writes it, addresses in `ip -o addr show` order: newest IPv6
// first) to `nft -f` in one namespace, installs the same tables with
// AddAntiSpoofing in another, and compares `nft list ruleset`.
func TestAntiSpoofingSameAsWGQuick(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft command as the reference")
	}
	nsRef, _, refFW, _ := namedNS(t, "wlnfr")
	ns, _, fw, _ := namedNS(t, "wlnfw")
	setUpTunnelLink(t, ns, "wgt0", "192.0.2.7/24", "2001:db8::7/64", "2001:db8:1::9/128")
	script := `add table ip wg-quick-wgt0
add chain ip wg-quick-wgt0 preraw { type filter hook prerouting priority -300; }
add chain ip wg-quick-wgt0 premangle { type filter hook prerouting priority -150; }
add chain ip wg-quick-wgt0 postmangle { type filter hook postrouting priority -150; }
add rule ip wg-quick-wgt0 preraw iifname != "wgt0" ip daddr 192.0.2.7 fib saddr type != local drop
add rule ip wg-quick-wgt0 postmangle meta l4proto udp mark 4660 ct mark set mark 
add rule ip wg-quick-wgt0 premangle meta l4proto udp meta mark set ct mark 
add table ip6 wg-quick-wgt0
add chain ip6 wg-quick-wgt0 preraw { type filter hook prerouting priority -300; }
add chain ip6 wg-quick-wgt0 premangle { type filter hook prerouting priority -150; }
add chain ip6 wg-quick-wgt0 postmangle { type filter hook postrouting priority -150; }
add rule ip6 wg-quick-wgt0 preraw iifname != "wgt0" ip6 daddr 2001:db8:1::9 fib saddr type != local drop
add rule ip6 wg-quick-wgt0 preraw iifname != "wgt0" ip6 daddr 2001:db8::7 fib saddr type != local drop
add rule ip6 wg-quick-wgt0 postmangle meta l4proto udp mark 4660 ct mark set mark 
add rule ip6 wg-quick-wgt0 premangle meta l4proto udp meta mark set ct mark 
`
	f := t.TempDir() + "/wg-quick.nft"
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	tnetns.Run(t, nsRef, "nft", "-f", f)
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		if err := fw.AddAntiSpoofing(fam, "wgt0", 0x1234); err != nil {
			t.Fatal(err)
		}
	}
	want := tnetns.Run(t, nsRef, "nft", "list", "ruleset")
	got := tnetns.Run(t, ns, "nft", "list", "ruleset")
	if got != want {
		t.Errorf("nft list ruleset:\n%s\nwant (wg-quick's):\n%s", got, want)
	}
	// Tables wg-quick made are removed by DeleteFirewall, as wg-quick
	// removes ours.
	if n, err := refFW.DeleteFirewall("wgt0"); err != nil || n != 2 {
		t.Errorf("DeleteFirewall of wg-quick's tables = %d, %v; want 2", n, err)
	}
	if left := tnetns.Run(t, nsRef, "nft", "list", "ruleset"); strings.TrimSpace(left) != "" {
		t.Errorf("left after DeleteFirewall:\n%s", left)
	}
}

// TestDeleteFirewallAndStaleTable checks that a second AddAntiSpoofing
// replaces a table left behind (no doubled rules), and that DeleteFirewall
// removes both families' tables (and only those of the interface).
func TestDeleteFirewallAndStaleTable(t *testing.T) {
	ns, c, fw, h := namedNS(t, "wlnfs")
	setUpTunnelLink(t, ns, "wgt0", "10.7.0.1/24", "fd07::1/64")
	setUpTunnelLink(t, ns, "wgt1", "10.8.0.1/24")
	c.Undo = nil // as after a successful `up`: a later `down` removes them
	for _, fam := range Families {
		if err := fw.AddAntiSpoofing(fam, "wgt0", 51820); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.AddAntiSpoofing(unix.AF_INET, "wgt1", 51821); err != nil {
		t.Fatal(err)
	}
	first := readBack(t, h)
	if err := fw.AddAntiSpoofing(unix.AF_INET, "wgt0", 51820); err != nil {
		t.Fatal(err)
	}
	if again := readBack(t, h); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Errorf("after adding again:\n%v\nwant:\n%v", again, first)
	}
	n, err := fw.DeleteFirewall("wgt0")
	if err != nil || n != 2 {
		t.Fatalf("DeleteFirewall = %d, %v; want 2 tables", n, err)
	}
	left := readBack(t, h)
	if len(left) != 1 || left["2 wg-quick-wgt1"] == "" {
		t.Errorf("left: %v", left)
	}
	if n, err := fw.DeleteFirewall("wgt0"); err != nil || n != 0 {
		t.Errorf("second DeleteFirewall = %d, %v", n, err)
	}
	if err := fw.AddAntiSpoofing(unix.AF_INET, "nosuch0", 51820); !errors.Is(err, ErrNoLink) {
		t.Errorf("missing interface: %v", err)
	}
}

// TestAntiSpoofingDropsSpoofedPackets sends pings to the tunnel's
// addresses from a neighbour on another interface (a host on the same LAN
// that routes the tunnel's addresses to us): answered without the rules,
// dropped with them, answered again after undo. The neighbour's pings to
// the LAN address itself are never affected.
func TestAntiSpoofingDropsSpoofedPackets(t *testing.T) {
	tnetns.Need(t, "ping")
	ns, c, fw, _ := namedNS(t, "wlnfa")
	peer := tnetns.New(t, "wlnfb")
	setUpTunnelLink(t, ns, "wgt0", "10.9.0.1/32", "fd09::1/128")
	tnetns.Veth(t, ns, "lan0", peer, "lan1")
	tnetns.Run(t, ns, "ip", "address", "add", "10.1.0.1/24", "dev", "lan0")
	tnetns.Run(t, ns, "ip", "address", "add", "fd01::1/64", "dev", "lan0", "nodad")
	tnetns.Run(t, peer, "ip", "address", "add", "10.1.0.2/24", "dev", "lan1")
	tnetns.Run(t, peer, "ip", "address", "add", "fd01::2/64", "dev", "lan1", "nodad")
	tnetns.Run(t, peer, "ip", "route", "add", "10.9.0.1/32", "via", "10.1.0.1")
	tnetns.Run(t, peer, "ip", "route", "add", "fd09::1/128", "via", "fd01::1")
	ping := func(addr string) error {
		_, err := tnetns.Try(peer, nil, "ping", "-c", "1", "-W", "1", addr)
		return err
	}
	check := func(stage string, tunnelAnswers bool) {
		t.Helper()
		for _, a := range []string{"10.9.0.1", "fd09::1"} {
			if err := ping(a); (err == nil) != tunnelAnswers {
				t.Errorf("%s: ping %s from the LAN: %v, want answered=%v", stage, a, err, tunnelAnswers)
			}
		}
		for _, a := range []string{"10.1.0.1", "fd01::1"} {
			if err := ping(a); err != nil {
				t.Errorf("%s: ping of the LAN address %s: %v", stage, a, err)
			}
		}
	}
	check("without rules", true)
	for _, fam := range Families {
		if err := fw.AddAntiSpoofing(fam, "wgt0", 51820); err != nil {
			t.Fatal(err)
		}
	}
	check("with rules", false)
	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	check("after undo", true)
}

func TestNoNftablesErrors(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("conn.Receive: %w", syscall.EOPNOTSUPP), true},
		{errors.Join(errors.New("x"), &os.SyscallError{Syscall: "socket", Err: syscall.EPROTONOSUPPORT}), true},
		{fmt.Errorf("netlink receive: %w", syscall.ENOENT), true},
		{syscall.EPERM, false},
		{errors.New("anything else"), false},
	} {
		if got := noNftables(tt.err); got != tt.want {
			t.Errorf("noNftables(%v) = %v", tt.err, got)
		}
	}
	var f Firewall
	err := f.addError("ip", "wg-quick-wg0", syscall.EOPNOTSUPP)
	if !errors.Is(err, ErrNoNftables) || !strings.Contains(err.Error(), "table ip wg-quick-wg0") {
		t.Errorf("addError = %v", err)
	}
}

// soRcvMark asks the kernel for each received packet's mark as an SO_MARK
// control message (Linux 5.19; not in x/sys/unix yet).
const soRcvMark = 75

// inNS runs fn on a thread moved into ns; sockets fn opens stay in ns. The
// thread is never unlocked, so it ends with its goroutine instead of going
// back to the pool in the wrong namespace.
func inNS(h vnetns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := vnetns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// TestFwmarkSavedAndRestored sends UDP with the tunnel's fwmark to an echo
// server on the LAN and reads the mark of the echo (SO_RCVMARK): none
// without the rules; the fwmark with them, put back from the connection
// tracking entry by premangle after postmangle saved it there.
func TestFwmarkSavedAndRestored(t *testing.T) {
	ns, _, fw, h := namedNS(t, "wlnfm")
	peer := tnetns.New(t, "wlnfe")
	setUpTunnelLink(t, ns, "wgt0", "10.9.0.1/32")
	tnetns.Veth(t, ns, "lan0", peer, "lan1")
	tnetns.Run(t, ns, "ip", "address", "add", "10.1.0.1/24", "dev", "lan0")
	tnetns.Run(t, ns, "ip", "address", "add", "fd01::1/64", "dev", "lan0", "nodad")
	tnetns.Run(t, peer, "ip", "address", "add", "10.1.0.2/24", "dev", "lan1")
	tnetns.Run(t, peer, "ip", "address", "add", "fd01::2/64", "dev", "lan1", "nodad")
	ph, err := vnetns.GetFromName(peer.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()

	// The echo server, in the peer namespace.
	var echo net.PacketConn
	if err := inNS(ph, func() (err error) { echo, err = net.ListenPacket("udp", ":5555"); return }); err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(buf[:n], from)
		}
	}()

	const fwmark = 51820
	// replyMark sends one datagram with SO_MARK fwmark from a new socket
	// in ns and returns the mark its echo arrived with.
	replyMark := func(to string) uint32 {
		t.Helper()
		var c *net.UDPConn
		if err := inNS(h, func() (err error) { c, err = net.ListenUDP("udp", nil); return }); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, fwmark)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soRcvMark, 1)
			}
		})
		if serr != nil {
			t.Skipf("cannot set SO_MARK / SO_RCVMARK (kernel older than 5.19?): %v", serr)
		}
		if _, err := c.WriteToUDPAddrPort([]byte("ping"), netip.MustParseAddrPort(to)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf, oob := make([]byte, 64), make([]byte, 128)
		_, oobn, _, _, err := c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			t.Fatalf("no echo from %s: %v", to, err)
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_MARK && len(m.Data) >= 4 {
				return binary.NativeEndian.Uint32(m.Data)
			}
		}
		return 0
	}
	targets := []string{"10.1.0.2:5555", "[fd01::2]:5555"}
	for _, to := range targets {
		if m := replyMark(to); m != 0 {
			t.Errorf("without the rules, the echo from %s has mark %d, want 0", to, m)
		}
	}
	for _, fam := range Families {
		if err := fw.AddAntiSpoofing(fam, "wgt0", fwmark); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range targets {
		if m := replyMark(to); m != fwmark {
			t.Errorf("with the rules, the echo from %s has mark %d, want %d", to, m, fwmark)
		}
	}
}
