package wgtunnel

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// inFreshNetns runs f on a thread moved into a new, empty network
// namespace (Up and Down change the namespace of the thread they run on,
// and the hooks they start inherit it). It skips unless root.
func inFreshNetns(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: changes a network namespace")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("cannot return to the original namespace: %v", err) // thread stays locked
			return
		}
		runtime.UnlockOSThread()
		orig.Close()
		ns.Close()
	}()
	f()
}

// nsState lists the links, addresses and routes of the thread's namespace.
func nsState(t *testing.T) string {
	t.Helper()
	var lines []string
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		lines = append(lines, "link "+l.Attrs().Name)
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_ALL)
		for _, a := range addrs {
			lines = append(lines, "addr "+a.IPNet.String()+" "+l.Attrs().Name)
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		lines = append(lines, "route "+r.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// veth makes the interface a fake engine starts: a veth pair (every
// kernel has it; the link is what Up configures, not what carries data).
func veth(name string) error {
	return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})
}

// tunnelConf is a tunnel with two addresses, an MTU and a peer whose
// allowed IPs need a route of their own.
func tunnelConf(t *testing.T, extra string) *wgquick.Config {
	t.Helper()
	cfg, err := wgquick.Parse("wlns0.conf", []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nAddress = 10.60.0.1/24, fd60::1/64\nMTU = 1400\n"+extra+"\n[Peer]\nPublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\nAllowedIPs = 10.61.0.0/16, fd61::/64\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = "wlns0"
	return cfg
}

func TestUpThatFailsLeavesTheNamespaceAsItWas(t *testing.T) {
	inFreshNetns(t, func() {
		before := nsState(t)
		eng := &fakeEngine{create: veth}
		var notes []string
		err := Up(context.Background(), tunnelConf(t, "PostUp = false"), Options{Engine: eng, Note: func(s string) { notes = append(notes, s) }})
		if err == nil || !strings.Contains(err.Error(), `hook "false" failed`) {
			t.Fatalf("Up = %v, want the PostUp failure", err)
		}
		// The veth peer goes with the link; the namespace is as before.
		if after := nsState(t); after != before {
			t.Errorf("after a failed Up:\n%s\nwant:\n%s", after, before)
		}
		if len(notes) != 1 || !strings.Contains(notes[0], "undoing") {
			t.Errorf("notes = %q, want one about undoing", notes)
		}
		if !slices.Contains(eng.calls, "stopped wlns0") {
			t.Errorf("engine calls %q: a failed Up must wait for the engine to stop", eng.calls)
		}
	})
}

func TestUpThenDownLeavesTheNamespaceAsItWas(t *testing.T) {
	inFreshNetns(t, func() {
		before := nsState(t)
		eng := &fakeEngine{create: veth}
		var log []string
		o := Options{Engine: eng, Log: func(s string) { log = append(log, s) }}
		cfg := tunnelConf(t, "")
		if err := Up(context.Background(), cfg, o); err != nil {
			t.Fatal(err)
		}
		up := nsState(t)
		for _, want := range []string{"addr 10.60.0.1/24 wlns0", "addr fd60::1/64 wlns0", "10.61.0.0/16", "fd61::/64"} {
			if !strings.Contains(up, want) {
				t.Errorf("up: no %q in\n%s", want, up)
			}
		}
		if st, err := Status("wlns0", o); err != nil || !st.Up {
			t.Errorf("Status after Up = %+v, %v", st, err)
		}
		if err := checkConfiguredByUp(eng, "wlns0"); err != nil {
			t.Errorf("after Up: %v", err)
		}
		if err := Down(cfg, o); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(recordPath("wlns0")); !os.IsNotExist(err) {
			t.Errorf("after Down, the record of Up: %v; want none", err)
		}
		if after := nsState(t); after != before {
			t.Errorf("after Down:\n%s\nwant:\n%s", after, before)
		}
		if st, err := Status("wlns0", o); err != nil || st.Up {
			t.Errorf("Status after Down = %+v, %v; want down", st, err)
		}
		if !slices.Contains(log, "ip link set mtu 1400 dev wlns0") {
			t.Errorf("log %q lacks the MTU", log)
		}
	})
}

// TestUpWithDNSAndNoResolverFailsClosed brings a tunnel with DNS up where
// neither resolvconf (PATH is empty) nor systemd-resolved (the system bus
// is nowhere) can take the servers: Up fails at the DNS line and leaves
// the namespace as it was; with DNSOptional it comes up with a warning.
func TestUpWithDNSAndNoResolverFailsClosed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+dir+"/no-bus")
	inFreshNetns(t, func() {
		before := nsState(t)
		eng := &fakeEngine{create: veth}
		err := Up(context.Background(), tunnelConf(t, "DNS = 10.60.0.53, corp.example"), Options{Engine: eng})
		want := "wlns0.conf:5: DNS: neither systemd-resolved is running nor resolvconf is installed"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "DNSOptional") {
			t.Fatalf("Up = %v, want %q", err, want)
		}
		if after := nsState(t); after != before {
			t.Errorf("after a failed Up:\n%s\nwant:\n%s", after, before)
		}
		var warned []string
		o := Options{Engine: &fakeEngine{create: veth}, Warn: func(s string) { warned = append(warned, s) }}
		cfg := tunnelConf(t, "DNS = 10.60.0.53\n# wirelane: DNSOptional = true")
		if err := Up(context.Background(), cfg, o); err != nil {
			t.Fatalf("Up with DNSOptional: %v", err)
		}
		if len(warned) != 1 || !strings.Contains(warned[0], "going on without them (DNSOptional)") {
			t.Errorf("warnings %q", warned)
		}
		if err := Down(cfg, o); err != nil {
			t.Fatal(err)
		}
	})
}
