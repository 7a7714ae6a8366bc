package wgtunnel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Down takes the tunnel of cfg down: PreDown hooks, SaveConfig, the
// policy rules of a default route, the nftables tables, the link (its
// engine stops when it goes), DNS, then PostDown hooks. A save that would
// lose what the file holds (saveDevice) is refused, and Down with it,
// leaving the tunnel up; when the device alone shows that, before PreDown
// runs. A tunnel whose engine is gone is cleaned up and runs only
// PostDown (downOrphan). It refuses to touch an interface whose device
// answers but that lives in another network namespace.
func Down(cfg *wgquick.Config, o Options) error {
	name := cfg.Name
	eng, release := o.engine()
	defer release()
	dev, err := eng.Device(name)
	if err != nil {
		return downOrphan(eng, cfg, &o)
	}
	nc, err := o.netConf(false)
	if err != nil {
		return err
	}
	defer nc.Close()
	if !nc.LinkExists(name) {
		// The device answered, but sockets are shared by all network
		// namespaces: the interface lives in another one. Touch nothing
		// (removing the socket would stop that tunnel).
		return fmt.Errorf("`%s' is not an interface in this network namespace (a daemon for it answers, so it probably lives in another one)", name)
	}
	// A save that SaveConfig asks for and that would be refused stops
	// Down before PreDown (checkSavable), or after it (the addresses).
	refused := func(err error) error {
		if !errors.Is(err, ErrNotConfiguredByUp) && !errors.Is(err, ErrNoAddresses) && !errors.Is(err, ErrNoPrivateKey) {
			return err
		}
		err = fmt.Errorf("%w; the tunnel stays up. To take it down without saving, delete the interface (ip link del %s) and run down again, or set SaveConfig = false", err, name)
		if !errors.Is(err, ErrNoPrivateKey) {
			err = fmt.Errorf("%w; if what runs is right, save it first with `wirelane save --force %s`", err, cfg.Path)
		}
		return err
	}
	if cfg.Interface.SaveConfig {
		if err := checkSavable(cfg, eng, dev); err != nil {
			return refused(err)
		}
	}
	ctx := context.Background()
	if err := runHooks(ctx, &o, cfg.Interface.PreDown, name); err != nil {
		return err
	}
	if cfg.Interface.SaveConfig {
		if err := saveDevice(cfg, eng, dev, nc, &o); err != nil {
			return refused(err)
		}
	}
	var errs []error
	if t := cfg.Interface.Table; (t == "" || t == "auto") && dev.FirewallMark != 0 && hasDefault(dev) {
		for _, fam := range netcfg.Families {
			if _, err := nc.DeleteDefaultRouteRules(fam, dev.FirewallMark); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := nc.Firewall().DeleteFirewall(name); err != nil {
		errs = append(errs, err)
	}
	if err := nc.DeleteLink(name); err != nil {
		errs = append(errs, err)
	} else if _, err := removeRecord(name); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.Interface.DNS) > 0 {
		if err := nc.UnsetDNS(name); err != nil {
			errs = append(errs, err)
		}
	}
	eng.Stopped(name, 2*time.Second)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return runHooks(ctx, &o, cfg.Interface.PostDown, name)
}

// downOrphan cleans up after a tunnel whose engine is gone (it crashed or
// was killed): the interface if it is still there, the stale socket, the
// policy rules of a default route (only those no live tunnel needs), the
// firewall, the DNS record and Up's record of the device (record.go), then runs the
// PostDown hooks, which undo what PostUp did outside the interface (that
// stays behind a dead daemon too). PreDown is not run: it is for a tunnel
// still up. Nothing is saved: the running state died with the daemon, and
// the file keeps its contents. With nothing left to remove it fails as
// wg-quick does, without hooks.
func downOrphan(eng Engine, cfg *wgquick.Config, o *Options) error {
	name := cfg.Name
	nc, err := o.netConf(false)
	if err != nil {
		return err
	}
	defer nc.Close()
	removed := 0
	var errs []error
	if nc.LinkExists(name) {
		if err := nc.DeleteLink(name); err != nil {
			errs = append(errs, err)
		} else {
			removed++
		}
	}
	if sr, ok := eng.(staleRemover); ok {
		if ok, err := sr.RemoveStale(name); err != nil {
			errs = append(errs, err)
		} else if ok {
			removed++
		}
	}
	if t := cfg.Interface.Table; (t == "" || t == "auto") && cfg.HasDefaultRoute() {
		mark := defaultTable
		if m := cfg.Interface.FwMark; m != nil && *m != 0 {
			mark = int(*m)
		}
		for _, fam := range netcfg.Families {
			n, err := nc.DeleteOrphanedDefaultRouteRules(fam, mark)
			removed += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	n, err := nc.Firewall().DeleteFirewall(name)
	removed += n
	if err != nil {
		errs = append(errs, err)
	}
	// The record of Up alone (the daemon exited with its interface and
	// took its socket along) still says that this tunnel was up and
	// never taken down: its PostDown is due.
	if ok, err := removeRecord(name); err != nil {
		errs = append(errs, err)
	} else if ok {
		removed++
	}
	if removed > 0 && len(cfg.Interface.DNS)+len(cfg.Interface.DNSSearch) > 0 {
		if err := nc.UnsetDNS(name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if removed == 0 {
		return fmt.Errorf("`%s' is not a WireGuard interface", name)
	}
	o.warnf("the daemon for %s was not running; removed what it left behind (PreDown not run)", name)
	if cfg.Interface.SaveConfig {
		o.warnf("SaveConfig: the running configuration of %s went with its daemon; %s keeps its contents", name, cfg.Path)
	}
	return runHooks(context.Background(), o, cfg.Interface.PostDown, name)
}
