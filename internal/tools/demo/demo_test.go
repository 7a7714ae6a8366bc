package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and interfaces")
	}
}

func newNS(t *testing.T, name string) *Namespace {
	t.Helper()
	ns, err := NewNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

func linkNames(t *testing.T, ns *Namespace) []string {
	t.Helper()
	var names []string
	err := withConf(ns, func(c *netcfg.Conf) error {
		h, err := netlink.NewHandleAt(ns.Handle)
		if err != nil {
			return err
		}
		defer h.Close()
		ls, err := h.LinkList()
		for _, l := range ls {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestNamespacesAreFreshAndRemoved(t *testing.T) {
	needRoot(t)
	ns := newNS(t, "")
	if got := linkNames(t, ns); len(got) != 1 || got[0] != "lo" {
		t.Errorf("fresh namespace has links %v, want only lo", got)
	}
	// Do runs inside the namespace and returns the thread afterwards.
	var inside netns.NsHandle
	if err := ns.Do(func() error {
		var err error
		inside, err = netns.Get()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if !inside.Equal(ns.Handle) {
		t.Error("Do did not run inside the namespace")
	}

	name := "wl-demotest-" + strings.ReplaceAll(t.Name(), "/", "-")
	named, err := NewNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + name); err != nil {
		t.Errorf("named namespace not visible to ip netns: %v", err)
	}
	if err := named.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + name); err == nil {
		t.Error("named namespace still there after Close")
	}
}

// vethPair joins two fresh namespaces with a veth pair: A 10.123.0.1/24,
// B 10.123.0.2/24.
func vethPair(t *testing.T) (a, b *Namespace) {
	t.Helper()
	needRoot(t)
	a, b = newNS(t, ""), newNS(t, "")
	h, err := netlink.NewHandleAt(a.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va", MTU: 1420}, PeerName: "vb", PeerNamespace: netlink.NsFd(b.Handle)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns   *Namespace
		link string
		addr string
	}{{a, "va", "10.123.0.1/24"}, {b, "vb", "10.123.0.2/24"}} {
		if err := withConf(s.ns, func(c *netcfg.Conf) error {
			if err := c.AddAddress(s.link, netip.MustParsePrefix(s.addr)); err != nil {
				return err
			}
			if err := c.SetUp("lo"); err != nil {
				return err
			}
			return c.SetUp(s.link)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func TestPingOverVeth(t *testing.T) {
	a, _ := vethPair(t)
	ctx := context.Background()
	// The kernel may take up to a second to report a new veth's carrier;
	// a first ping waits for that, the measured ones below must not.
	if rs, err := Ping(ctx, a, netip.MustParseAddr("10.123.0.2"), 1, 0, 3*time.Second); err != nil || countOK(rs) != 1 {
		t.Fatalf("warm-up ping: %+v, %v", rs, err)
	}
	rs, err := Ping(ctx, a, netip.MustParseAddr("10.123.0.2"), 3, 10*time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || countOK(rs) != 3 {
		t.Fatalf("results %+v, want 3 replies", rs)
	}
	for _, r := range rs {
		if r.RTT <= 0 || r.RTT > time.Second {
			t.Errorf("implausible RTT %v", r.RTT)
		}
	}
	// Nobody answers for .9: the request is reported lost, not hung.
	rs, err = Ping(ctx, a, netip.MustParseAddr("10.123.0.9"), 1, 0, 300*time.Millisecond)
	if err != nil || len(rs) != 1 || rs[0].OK {
		t.Fatalf("ping to a silent address: %+v, %v", rs, err)
	}
	if !strings.Contains(pingSummary(rs), "0/1 replies") {
		t.Errorf("summary %q", pingSummary(rs))
	}
}

func TestThroughputOverVeth(t *testing.T) {
	a, b := vethPair(t)
	ticks := 0
	res, err := Throughput(context.Background(), a, b, netip.MustParseAddr("10.123.0.2"), 700*time.Millisecond, 100*time.Millisecond,
		func(n uint64, el time.Duration) { ticks++ })
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes < 1<<20 || res.Duration < 500*time.Millisecond || res.Duration > 3*time.Second {
		t.Errorf("result %+v: want over 1 MiB in about 0.7s", res)
	}
	if res.BitsPerSecond() <= 0 || ticks < 3 {
		t.Errorf("rate %v, %d progress calls", res.BitsPerSecond(), ticks)
	}
}

func TestThroughputStopsOnCancel(t *testing.T) {
	a, b := vethPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Throughput(ctx, a, b, netip.MustParseAddr("10.123.0.2"), time.Minute, 100*time.Millisecond, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v after cancellation", d)
	}
}

func TestRunNeedsStarterAndRoot(t *testing.T) {
	if _, err := Run(context.Background(), Options{}); err == nil {
		t.Error("Run without a daemon starter succeeded")
	}
	old := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = old }()
	started := false
	_, err := Run(context.Background(), Options{Engine: &fakeEngine{start: func(string) error { started = true; return nil }}})
	if err == nil || !strings.Contains(err.Error(), "must run as root") || started {
		t.Errorf("as a normal user: err = %v, daemon started %v", err, started)
	}
}

func TestFormatRate(t *testing.T) {
	for bps, want := range map[float64]string{0: "0.00 bit/s", 999: "999.00 bit/s", 1.05e9: "1.05 Gbit/s", 2.5e6: "2.50 Mbit/s"} {
		if got := formatRate(bps); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", bps, got, want)
		}
	}
}

func TestRunCleansUpWhenTheDaemonFails(t *testing.T) {
	needRoot(t)
	var out strings.Builder
	started := 0
	_, err := Run(context.Background(), Options{
		Keep: true, // named namespaces, so their removal can be observed
		Out:  &out,
		Engine: &fakeEngine{start: func(string) error {
			started++
			return errors.New("no daemon today")
		}},
	})
	if err == nil || !strings.Contains(err.Error(), "no daemon today") || started != 1 {
		t.Fatalf("err = %v after %d starts", err, started)
	}
	tag := "wl-demo-" + netNameTag()
	for _, s := range []string{"a", "b"} {
		if _, err := os.Stat("/var/run/netns/" + tag + "-" + s); err == nil {
			t.Errorf("namespace %s-%s left behind", tag, s)
		}
	}
	if !strings.Contains(out.String(), "cleanup:") {
		t.Errorf("no cleanup reported:\n%s", out.String())
	}
}

// fakeEngine is an engine whose Start is the test's; its devices never
// exist.
type fakeEngine struct{ start func(name string) error }

func (f *fakeEngine) Start(_ context.Context, name string) error { return f.start(name) }
func (f *fakeEngine) Device(name string) (*wgtypes.Device, error) {
	return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}
func (f *fakeEngine) Devices() ([]*wgtypes.Device, error) { return nil, nil }
func (f *fakeEngine) Configure(name string, _ wgtypes.Config) error {
	return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}
func (f *fakeEngine) Stopped(string, time.Duration) {}
func (f *fakeEngine) InUse(string) bool             { return false }
func (f *fakeEngine) Close() error                  { return nil }
