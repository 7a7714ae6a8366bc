package wgtunnel

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const recordTestBody = "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nAddress = 10.60.0.1/24\nSaveConfig = true\n\n[Peer]\nPublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\nAllowedIPs = 10.61.0.0/16\n"

// keyedEngine is a fake engine running name with the file's key and a
// fresh instance, as a daemon that answers after some start.
func keyedEngine(t *testing.T, name string) *fakeEngine {
	t.Helper()
	k, err := wgtypes.ParseKey("yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeEngine{
		devs:      map[string]*wgtypes.Device{name: {Name: name, PrivateKey: k}},
		instances: map[string]string{name: "instance 0"},
	}
}

// recordTestConf writes the file of name into a new directory.
func recordTestConf(t *testing.T, name string) *wgquick.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".conf")
	if err := os.WriteFile(p, []byte(recordTestBody), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := wgquick.Parse(p, []byte(recordTestBody))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = name
	return cfg
}

// fileKept fails unless cfg's file still holds recordTestBody and has no
// backup (nothing was written).
func fileKept(t *testing.T, cfg *wgquick.Config) {
	t.Helper()
	if b, _ := os.ReadFile(cfg.Path); string(b) != recordTestBody {
		t.Errorf("the file changed to:\n%s", b)
	}
	onlyFiles(t, filepath.Dir(cfg.Path), filepath.Base(cfg.Path))
}

func TestSaveRefusesADaemonThatUpDidNotConfigure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		record func(eng *fakeEngine, cfg *wgquick.Config) error
		want   string
	}{
		{"no record: started by something else", func(*fakeEngine, *wgquick.Config) error { return nil },
			"there is no record of an `up` of wlrec0"},
		{"up was interrupted before its last step", func(eng *fakeEngine, cfg *wgquick.Config) error { return writeRecord(eng, cfg, false) },
			"did not finish configuring it"},
		{"the daemon restarted after up", func(eng *fakeEngine, cfg *wgquick.Config) error {
			if err := writeRecord(eng, cfg, true); err != nil {
				return err
			}
			eng.restart(cfg.Name)
			return nil
		}, "is gone and another answers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := recordTestConf(t, "wlrec0")
			eng := keyedEngine(t, cfg.Name)
			defer removeRecord(cfg.Name)
			if err := tt.record(eng, cfg); err != nil {
				t.Fatal(err)
			}
			err := Save(cfg, Options{Engine: eng})
			if !errors.Is(err, ErrNotConfiguredByUp) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Save = %v; want ErrNotConfiguredByUp saying %q", err, tt.want)
			}
			for _, want := range []string{"not saving wlrec0 to " + cfg.Path + ": ", "(the file keeps its contents)"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Save = %v; want it to say %q", err, want)
				}
			}
			fileKept(t, cfg)
		})
	}
}

func TestCheckAddressesRefusesOnlyTheLossOfEveryAddress(t *testing.T) {
	a := netip.MustParsePrefix("10.60.0.1/24")
	b := netip.MustParsePrefix("fd60::1/64")
	conf := func(addrs ...netip.Prefix) *wgquick.Config {
		return &wgquick.Config{Interface: wgquick.Interface{Addresses: addrs}}
	}
	for _, tt := range []struct {
		name          string
		file, running *wgquick.Config
		refused       bool
	}{
		{"the file has addresses and the interface none", conf(a, b), conf(), true},
		{"the interface kept one of two", conf(a, b), conf(a), false},
		{"the admin added one", conf(a), conf(a, b), false},
		{"neither has any", conf(), conf(), false},
		{"the interface has others", conf(a), conf(b), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAddresses(tt.file, tt.running)
			if got := errors.Is(err, ErrNoAddresses); got != tt.refused {
				t.Errorf("checkAddresses = %v; refused %v, want %v", err, got, tt.refused)
			}
		})
	}
}

func TestAFailedUpLeavesNoRecord(t *testing.T) {
	// No interface is made (no create): the link step fails after the
	// engine started and the record was written.
	cfg := recordTestConf(t, "wlrec1")
	eng := &fakeEngine{}
	if err := Up(context.Background(), cfg, Options{Engine: eng}); err == nil {
		t.Fatal("Up without an interface succeeded")
	}
	if _, err := os.Stat(recordPath(cfg.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after a failed Up, the record: %v; want none", err)
	}
}

// TestSaveKeepsWhatTheAdminChangedButNotARestartedDaemon is the line
// between a legitimate save and a lossy one: peers removed with `wg set`
// are saved (as wg-quick saves them); an interface without its addresses,
// or another daemon with the same key but no peers, is not, neither by
// Save nor by Down (which then runs no PreDown and leaves the tunnel up).
func TestSaveKeepsWhatTheAdminChangedButNotARestartedDaemon(t *testing.T) {
	inFreshNetns(t, func() {
		eng := &fakeEngine{create: veth}
		o := Options{Engine: eng}
		cfg := recordTestConf(t, "wlrec2")
		if err := Up(context.Background(), cfg, o); err != nil {
			t.Fatal(err)
		}
		eng.mu.Lock()
		eng.devs[cfg.Name].Peers = nil // wg set wlrec2 peer K remove
		eng.mu.Unlock()
		if err := Save(cfg, o); err != nil {
			t.Fatalf("Save after a peer was removed: %v", err)
		}
		saved, _ := os.ReadFile(cfg.Path)
		if c, err := wgquick.Parse(cfg.Path, saved); err != nil || len(c.Peers) != 0 || len(c.Interface.Addresses) != 1 {
			t.Fatalf("saved (%v):\n%s\nwant the address and no peer", err, saved)
		}

		// The interface loses its addresses: refused.
		l, err := netlink.LinkByName(cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		for _, a := range addrs {
			netlink.AddrDel(l, &a)
		}
		if err := Save(cfg, o); !errors.Is(err, ErrNoAddresses) || !strings.Contains(err.Error(), cfg.Path) {
			t.Errorf("Save without addresses = %v; want ErrNoAddresses naming the file", err)
		}

		// Another daemon with the same key answers: refused by Save and
		// by Down, which leaves the tunnel up.
		eng.restart(cfg.Name)
		marker := filepath.Join(t.TempDir(), "predown")
		cfg.Interface.PreDown = []string{"touch " + marker}
		for what, f := range map[string]func() error{"Save": func() error { return Save(cfg, o) }, "Down": func() error { return Down(cfg, o) }} {
			if err := f(); !errors.Is(err, ErrNotConfiguredByUp) {
				t.Errorf("%s of a restarted daemon = %v; want ErrNotConfiguredByUp", what, err)
			}
			if b, _ := os.ReadFile(cfg.Path); string(b) != string(saved) {
				t.Errorf("%s changed the file to:\n%s", what, b)
			}
		}
		if _, err := netlink.LinkByName(cfg.Name); err != nil {
			t.Errorf("Down refused, yet the interface is gone: %v", err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("a Down refused for the device ran PreDown")
		}

		// save --force: the admin vouches for what runs. It is saved, and
		// the daemon counts as configured, so Down (of the file as saved)
		// saves and takes the tunnel down.
		if err := SaveAnyway(cfg, o); err != nil {
			t.Fatalf("SaveAnyway: %v", err)
		}
		forced, _ := os.ReadFile(cfg.Path)
		fc, err := wgquick.Parse(cfg.Path, forced)
		if err != nil || len(fc.Interface.Addresses) != 0 || fc.Interface.PrivateKey == nil {
			t.Fatalf("SaveAnyway wrote (%v):\n%s", err, forced)
		}
		fc.Name = cfg.Name
		if err := Down(fc, o); err != nil {
			t.Fatalf("Down after SaveAnyway: %v", err)
		}
		if _, err := netlink.LinkByName(cfg.Name); err == nil {
			t.Error("the interface is still there after Down")
			netlink.LinkDel(l)
		}
		removeRecord(cfg.Name)
	})
}

func TestSaveAnywayNeverSavesAStateWithoutThePrivateKey(t *testing.T) {
	cfg := recordTestConf(t, "wlrec4")
	eng := &fakeEngine{devs: map[string]*wgtypes.Device{cfg.Name: {Name: cfg.Name}}}
	if err := SaveAnyway(cfg, Options{Engine: eng}); !errors.Is(err, ErrNoPrivateKey) {
		t.Fatalf("SaveAnyway of a keyless state = %v, want ErrNoPrivateKey", err)
	}
	fileKept(t, cfg)
}

// TestDownAfterTheDaemonDiedRunsPostDownAndKeepsTheFile: the daemon exited
// with its interface and took its socket along, so only Up's record is
// left. Down still finishes the tunnel: PostDown runs (PreDown does not),
// nothing is saved, the warning says the file keeps its contents.
func TestDownAfterTheDaemonDiedRunsPostDownAndKeepsTheFile(t *testing.T) {
	inFreshNetns(t, func() {
		cfg := recordTestConf(t, "wlrec3")
		marker := filepath.Join(t.TempDir(), "hooks")
		cfg.Interface.PreDown = []string{"echo predown >> " + marker}
		cfg.Interface.PostDown = []string{"echo postdown-%i >> " + marker}
		eng := keyedEngine(t, cfg.Name)
		if err := writeRecord(eng, cfg, true); err != nil {
			t.Fatal(err)
		}
		dead := &fakeEngine{}
		var warned []string
		o := Options{Engine: dead, Warn: func(s string) { warned = append(warned, s) }}
		if err := Down(cfg, o); err != nil {
			t.Fatalf("Down after the daemon died: %v", err)
		}
		if b, _ := os.ReadFile(marker); string(b) != "postdown-wlrec3\n" {
			t.Errorf("hooks run: %q, want PostDown's only", b)
		}
		fileKept(t, cfg)
		if w := strings.Join(warned, "\n"); !strings.Contains(w, "was not running") || !strings.Contains(w, cfg.Path+" keeps its contents") {
			t.Errorf("warnings:\n%s", w)
		}
		if _, err := os.Stat(recordPath(cfg.Name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the record after Down: %v; want none", err)
		}
		// Nothing is left: a second Down fails as wg-quick does, without hooks.
		if err := Down(cfg, o); err == nil || !strings.Contains(err.Error(), "is not a WireGuard interface") {
			t.Errorf("second Down = %v", err)
		}
		if b, _ := os.ReadFile(marker); string(b) != "postdown-wlrec3\n" {
			t.Errorf("the second Down ran hooks: %q", b)
		}
	})
}
