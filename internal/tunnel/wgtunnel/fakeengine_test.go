package wgtunnel

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// fakeEngine is an in-memory Engine: devices are records in a map, and
// each method can be made to fail.
type fakeEngine struct {
	mu       sync.Mutex // guards every field below
	devs     map[string]*wgtypes.Device
	startErr error
	devErr   error // returned by Device for a name that is not running
	inUse    bool
	calls    []string
	// create, when set, makes the interface for Start (tests that
	// change a real network namespace).
	create func(name string) error
	// starts counts Start calls; a device's instance is the count at
	// its start (instances), as a restarted daemon gets a new socket.
	starts    int
	instances map[string]string
}

func (f *fakeEngine) Instance(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.instances[name]; ok {
		return id, nil
	}
	return "", fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

// restart replaces the device name by a fresh one (a new instance) with
// only the private key of the old one, as a daemon restarted by
// something else and given its key again.
func (f *fakeEngine) restart(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	f.instances[name] = fmt.Sprintf("instance %d", f.starts)
	f.devs[name] = &wgtypes.Device{Name: name, PrivateKey: f.devs[name].PrivateKey}
}

func (f *fakeEngine) record(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeEngine) Start(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("start %s", name)
	if f.startErr != nil {
		return f.startErr
	}
	if f.create != nil {
		if err := f.create(name); err != nil {
			return err
		}
	}
	if f.devs == nil {
		f.devs = map[string]*wgtypes.Device{}
	}
	f.devs[name] = &wgtypes.Device{Name: name}
	if f.instances == nil {
		f.instances = map[string]string{}
	}
	f.starts++
	f.instances[name] = fmt.Sprintf("instance %d", f.starts)
	return nil
}

func (f *fakeEngine) Device(name string) (*wgtypes.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.devs[name]; ok {
		return d, nil
	}
	if f.devErr != nil {
		return nil, f.devErr
	}
	return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

func (f *fakeEngine) Devices() ([]*wgtypes.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*wgtypes.Device
	for _, d := range f.devs {
		out = append(out, d)
	}
	return out, nil
}

func (f *fakeEngine) Configure(name string, cfg wgtypes.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("configure %s", name)
	d, ok := f.devs[name]
	if !ok {
		return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if cfg.ReplacePeers {
		d.Peers = nil
	}
	for _, pc := range cfg.Peers {
		d.Peers = append(d.Peers, wgtypes.Peer{PublicKey: pc.PublicKey, AllowedIPs: pc.AllowedIPs})
	}
	if cfg.PrivateKey != nil {
		d.PrivateKey = *cfg.PrivateKey
	}
	if cfg.FirewallMark != nil {
		d.FirewallMark = *cfg.FirewallMark
	}
	return nil
}

func (f *fakeEngine) Stopped(name string, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("stopped %s", name)
	delete(f.devs, name)
	delete(f.instances, name)
}

func (f *fakeEngine) InUse(string) bool { return f.inUse }

func (f *fakeEngine) Close() error { return nil }
