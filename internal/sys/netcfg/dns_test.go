package netcfg

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestSetDNSWithoutAResolver checks that SetDNS changes nothing and
// returns ErrNoResolver when there is neither resolvconf on PATH nor a
// systemd-resolved on the bus, and says so when resolvconf is only
// resolved's stand-in; without servers it does nothing at all.
func TestSetDNSWithoutAResolver(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(dir, "no-bus"))
	c := &Conf{Undo: &Undo{}}
	if r, err := c.SetDNS("wl0", DNS{Search: []string{"corp.example"}}); r != "" || err != nil {
		t.Errorf("SetDNS without servers = %q, %v", r, err)
	}
	d := DNS{Servers: []netip.Addr{netip.MustParseAddr("10.0.0.53")}, Default: true}
	if _, err := c.SetDNS("wl0", d); err != ErrNoResolver {
		t.Errorf("SetDNS = %v, want ErrNoResolver", err)
	}
	if err := os.Symlink("/usr/bin/resolvectl", filepath.Join(dir, "resolvectl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("resolvectl", filepath.Join(dir, "resolvconf")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/resolvectl"); err == nil {
		if _, err := c.SetDNS("wl0", d); err == nil || !strings.Contains(err.Error(), "resolvconf here is systemd-resolved's, and no systemd-resolved serves this network namespace") {
			t.Errorf("SetDNS with the stand-in = %v", err)
		}
	}
	if c.Undo.Len() != 0 {
		t.Errorf("%d undo steps recorded for nothing done", c.Undo.Len())
	}
}

// TestSetDNSThroughSystemdResolved gives a link DNS settings through a
// real systemd-resolved (private bus, in the link's namespace) and takes
// them back with the undo stack, as a failed `up` does.
func TestSetDNSThroughSystemdResolved(t *testing.T) {
	tnetns.Need(t)
	ns := tnetns.New(t, "ncdns")
	rd := tnetns.StartResolved(t, ns)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", strings.TrimPrefix(rd.Env, "DBUS_SYSTEM_BUS_ADDRESS="))
	tnetns.Run(t, ns, "ip", "tuntap", "add", "wldns0", "mode", "tun")
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := NewAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var log []string
	c.Log = func(s string) { log = append(log, s) }
	d := DNS{Servers: []netip.Addr{netip.MustParseAddr("10.9.0.53"), netip.MustParseAddr("fd09::53")}, Search: []string{"corp.example"}, Default: true}
	by, err := c.SetDNS("wldns0", d)
	if err != nil || by != Resolved {
		t.Fatalf("SetDNS = %q, %v", by, err)
	}
	if got := rd.Resolvectl(t, "dns", "wldns0"); !strings.Contains(got, "10.9.0.53 fd09::53") {
		t.Errorf("resolvectl dns: %s", got)
	}
	if got := rd.Resolvectl(t, "domain", "wldns0"); !strings.Contains(got, "corp.example ~.") {
		t.Errorf("resolvectl domain: %s", got)
	}
	if got := rd.Resolvectl(t, "default-route", "wldns0"); !strings.Contains(got, "yes") {
		t.Errorf("resolvectl default-route: %s", got)
	}
	if want := "resolvectl dns wldns0 10.9.0.53 fd09::53|resolvectl domain wldns0 corp.example ~.|resolvectl default-route wldns0 yes"; strings.Join(log, "|") != want {
		t.Errorf("log %q, want %q", log, want)
	}
	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := rd.Resolvectl(t, "dns", "wldns0"); strings.Contains(got, "10.9.0.53") {
		t.Errorf("after undo, resolvectl dns: %s", got)
	}
	if got := rd.Resolvectl(t, "domain", "wldns0"); strings.Contains(got, "corp.example") || strings.Contains(got, "~.") {
		t.Errorf("after undo, resolvectl domain: %s", got)
	}
}

// TestSystemdResolvedOfAnotherNamespaceIsNotUsed checks that a resolved
// serving another network namespace is left alone (its link indexes are
// not ours): with no resolvconf either, SetDNS fails closed.
func TestSystemdResolvedOfAnotherNamespaceIsNotUsed(t *testing.T) {
	tnetns.Need(t)
	rd := tnetns.StartResolved(t, tnetns.New(t, "ncdnsa"))
	ns := tnetns.New(t, "ncdnsb")
	tnetns.Run(t, ns, "ip", "tuntap", "add", "wldns1", "mode", "tun")
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", strings.TrimPrefix(rd.Env, "DBUS_SYSTEM_BUS_ADDRESS="))
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := NewAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SetDNS("wldns1", DNS{Servers: []netip.Addr{netip.MustParseAddr("10.9.0.53")}}); err != ErrNoResolver {
		t.Fatalf("SetDNS = %v, want ErrNoResolver", err)
	}
}
