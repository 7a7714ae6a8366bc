package wgtunnel

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Save writes the running tunnel's configuration (keys, peers, endpoints,
// addresses, MTU when the file set one) back to cfg.Path, keeping the
// file's DNS, Table, hooks and SaveConfig.
func Save(cfg *wgquick.Config, o Options) error {
	eng, release := o.engine()
	defer release()
	dev, err := eng.Device(cfg.Name)
	if err != nil {
		return fmt.Errorf("`%s' is not a WireGuard interface", cfg.Name)
	}
	nc, err := o.netConf(false)
	if err != nil {
		return err
	}
	defer nc.Close()
	return saveDevice(cfg, eng, dev, nc, &o)
}

// SaveAnyway is Save on the user's word that the running state is right
// (`wirelane save --force`): it also saves a device Up did not configure
// (one brought up by wg-quick or an older wirelane, or a restarted daemon)
// and an interface without addresses, and then records the device as
// configured (record.go), so that Down with SaveConfig saves it too. A
// state without a private key is never saved.
func SaveAnyway(cfg *wgquick.Config, o Options) error {
	eng, release := o.engine()
	defer release()
	dev, err := eng.Device(cfg.Name)
	if err != nil {
		return fmt.Errorf("`%s' is not a WireGuard interface", cfg.Name)
	}
	if dev.PrivateKey == (wgtypes.Key{}) {
		return refuseSave(cfg, ErrNoPrivateKey)
	}
	nc, err := o.netConf(false)
	if err != nil {
		return err
	}
	defer nc.Close()
	out, err := RunningConfig(cfg, dev, nc)
	if err != nil {
		return err
	}
	if err := writeRunning(cfg, out, &o); err != nil {
		return err
	}
	if err := writeRecord(eng, cfg, true); err != nil {
		return fmt.Errorf("saved %s, but cannot record its daemon as configured: %w", cfg.Path, err)
	}
	return nil
}

// RunningConfig returns the file that describes the running device dev:
// its keys, port, fwmark and peers, the interface's addresses (and MTU
// when cfg sets one) read through nc, and cfg's wg-quick-only settings.
func RunningConfig(cfg *wgquick.Config, dev *wgtypes.Device, nc *netcfg.Conf) (*wgquick.Config, error) {
	out := &wgquick.Config{Name: cfg.Name, Path: cfg.Path}
	in := &out.Interface
	if dev.PrivateKey != (wgtypes.Key{}) {
		k := wgquick.Key(dev.PrivateKey)
		in.PrivateKey = &k
	}
	if dev.ListenPort != 0 {
		p := uint16(dev.ListenPort)
		in.ListenPort = &p
	}
	if dev.FirewallMark != 0 {
		m := uint32(dev.FirewallMark)
		in.FwMark = &m
	}
	addrs, err := nc.Addresses(cfg.Name)
	if err != nil {
		return nil, err
	}
	in.Addresses = addrs
	in.DNS, in.DNSSearch = cfg.Interface.DNS, cfg.Interface.DNSSearch
	in.DNSOptional = cfg.Interface.DNSOptional
	if cfg.Interface.MTU != 0 {
		if l, err := nc.Link(cfg.Name); err == nil {
			in.MTU = l.Attrs().MTU
		}
	}
	in.Table, in.SaveConfig = cfg.Interface.Table, cfg.Interface.SaveConfig
	in.PreUp, in.PostUp, in.PreDown, in.PostDown = cfg.Interface.PreUp, cfg.Interface.PostUp, cfg.Interface.PreDown, cfg.Interface.PostDown
	for _, p := range dev.Peers {
		q := wgquick.Peer{PublicKey: wgquick.Key(p.PublicKey)}
		if p.PresharedKey != (wgtypes.Key{}) {
			k := wgquick.Key(p.PresharedKey)
			q.PresharedKey = &k
		}
		for _, n := range p.AllowedIPs {
			a, _ := netip.AddrFromSlice(n.IP)
			if n.IP.To4() != nil {
				a = a.Unmap()
			}
			ones, _ := n.Mask.Size()
			q.AllowedIPs = append(q.AllowedIPs, netip.PrefixFrom(a, ones))
		}
		if p.Endpoint != nil {
			ap := p.Endpoint.AddrPort()
			q.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		}
		if p.PersistentKeepaliveInterval > 0 {
			s := uint16(p.PersistentKeepaliveInterval / time.Second)
			q.PersistentKeepalive = &s
		}
		out.Peers = append(out.Peers, q)
	}
	return out, nil
}

// ErrNoPrivateKey is returned by Save (and Down with SaveConfig) when
// the running interface has no private key: writing that state would
// lose the key for good, so the file is left as it is.
var ErrNoPrivateKey = errors.New("the running interface has no private key")

// ErrNoAddresses is returned by Save (and Down with SaveConfig) when the
// interface has no address while the file has some. Addresses are set by
// Up (`wg set` cannot remove them), so their loss means the interface was
// made again by something else; the file is left as it is.
var ErrNoAddresses = errors.New("the interface has no address")

// saveDevice writes the running configuration to cfg.Path (writeConfigFile)
// unless that could lose what the file holds (refusal): the device has no
// private key, it is not the instance Up configured (checkConfiguredByUp),
// or the interface lost every address the file gives it. A refusal wraps
// ErrNoPrivateKey, ErrNotConfiguredByUp or ErrNoAddresses and names the
// file, which keeps its contents.
func saveDevice(cfg *wgquick.Config, eng Engine, dev *wgtypes.Device, nc *netcfg.Conf, o *Options) error {
	if err := checkSavable(cfg, eng, dev); err != nil {
		return err
	}
	out, err := RunningConfig(cfg, dev, nc)
	if err != nil {
		return err
	}
	if err := checkAddresses(cfg, out); err != nil {
		return refuseSave(cfg, err)
	}
	return writeRunning(cfg, out, o)
}

// writeRunning writes the running configuration out to cfg.Path.
func writeRunning(cfg, out *wgquick.Config, o *Options) error {
	o.logf("wg showconf %s > %s", cfg.Name, cfg.Path)
	if err := writeConfigFile(cfg.Path, out.Marshal()); err != nil {
		return fmt.Errorf("could not write configuration file: %w", err)
	}
	return nil
}

// checkSavable refuses to save the device dev of cfg when it has no
// private key or is not the instance Up configured; Down asks it before
// PreDown too, so that a down it would refuse runs no hook.
func checkSavable(cfg *wgquick.Config, eng Engine, dev *wgtypes.Device) error {
	if dev.PrivateKey == (wgtypes.Key{}) {
		return refuseSave(cfg, ErrNoPrivateKey)
	}
	if err := checkConfiguredByUp(eng, cfg.Name); err != nil {
		return refuseSave(cfg, err)
	}
	return nil
}

// refuseSave is the error of a refused save of cfg: why, and that the
// file keeps its contents.
func refuseSave(cfg *wgquick.Config, why error) error {
	return fmt.Errorf("not saving %s to %s: %w (the file keeps its contents)", cfg.Name, cfg.Path, why)
}

// checkAddresses refuses a running state without addresses for a file
// with some (ErrNoAddresses).
func checkAddresses(file, running *wgquick.Config) error {
	if n := len(file.Interface.Addresses); n > 0 && len(running.Interface.Addresses) == 0 {
		return fmt.Errorf("%w, while the file has %d (`up` sets them; the interface was probably made again by something else)", ErrNoAddresses, n)
	}
	return nil
}

// BackupSuffix is appended to a configuration file's name for the copy of
// its previous contents that Save keeps (wg0.conf -> wg0.conf.bak).
const BackupSuffix = ".bak"

// writeConfigFile replaces path with data so that a crash at any moment
// leaves either the old file or the new one, whole: the data goes to a new
// file beside it, is synced, and is renamed over path, and the directory
// is synced. The new file gets the old one's mode and owner (0600 and the
// caller's for a new file), and the old contents are kept in
// path+BackupSuffix, replaced the same way. The temporary file has a
// random name (O_EXCL): a fixed name could be a symbolic link someone
// planted next to a file in a shared directory, and root would write
// through it.
func writeConfigFile(path string, data []byte) error {
	old, err := os.ReadFile(path)
	var fi os.FileInfo
	switch {
	case err == nil:
		if fi, err = os.Stat(path); err != nil {
			return err
		}
		if err := replaceFile(path+BackupSuffix, old, fi); err != nil {
			return fmt.Errorf("keep the previous contents: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return err
	}
	return replaceFile(path, data, fi)
}

// replaceFile writes data to path atomically (see writeConfigFile), with
// the mode and owner of like when like is not nil.
func replaceFile(path string, data []byte, like os.FileInfo) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if like != nil {
		err = f.Chmod(like.Mode().Perm())
		if st, ok := like.Sys().(*syscall.Stat_t); ok && err == nil {
			err = f.Chown(int(st.Uid), int(st.Gid))
		}
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable only once the directory is.
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return nil
}
