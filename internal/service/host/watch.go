package host

import (
	"github.com/wirelane/wirelane/internal/control/service"
	"os"
)

// Watch hands the Host the service's publish function and starts the
// periodic look for files and daemons that came or went.
func (h *Host) Watch(publish func(service.Event)) (stop func()) {
	h.mu.Lock()
	h.publish = publish
	h.mu.Unlock()
	return service.Periodic(h.cfg.Interval, h.look, func() {
		h.mu.Lock()
		h.publish = nil
		h.mu.Unlock()
	})
}

// change is an event the look found, published once the lock is released.
type change struct {
	snap    entry
	tunnels string // service.ChangeAdded or ChangeRemoved; "" for a state change
	reason  string
}

// look brings the entries in line with the machine: a new file is a new
// tunnel (down, or up when its daemon already runs: a restart of the
// service, or `wirelane up` without it), a removed file of a tunnel that is
// down removes it, a WireGuard tunnel whose daemon went is down and one
// whose daemon came is up. A WireGuard device running here without a file
// is listed while it runs. Entries in the middle of an Up or Down are left
// alone.
func (h *Host) look() {
	files := h.scanFiles()
	// Which of the WireGuard interfaces answer: asked outside the lock.
	upNow := map[string]bool{}
	for _, f := range files {
		if f.kind == service.KindWireGuard || f.kind == service.KindGateway {
			upNow[f.iface] = h.wgUp(f.iface)
		}
	}
	var loose []string // running here, without a file
	if devs, err := h.eng.Devices(); err == nil {
		for _, d := range devs {
			if _, seen := upNow[d.Name]; !seen && linkHere(d.Name) {
				upNow[d.Name] = true
				loose = append(loose, d.Name)
			}
		}
	}
	h.mu.Lock()
	var out []change
	for name, f := range files {
		e := h.entries[name]
		if e == nil {
			if !fileThere(f.path) {
				continue // deleted since the scan (Delete holds the lock)
			}
			e = &entry{name: name, kind: f.kind, iface: f.iface, path: f.path, state: service.StateDown}
			if upNow[f.iface] {
				e.state = service.StateUp
			}
			h.entries[name] = e
			out = append(out, change{snap: *e, tunnels: service.ChangeAdded})
			continue
		}
		if e.path == "" && e.kind == f.kind { // a loose tunnel whose file appeared
			e.path = f.path
		}
	}
	for _, n := range loose {
		if h.entries[n] == nil {
			e := &entry{name: n, kind: service.KindWireGuard, iface: n, state: service.StateUp}
			h.entries[n] = e
			out = append(out, change{snap: *e, tunnels: service.ChangeAdded})
		}
	}
	for name, e := range h.entries {
		if e.busy() {
			continue
		}
		if f, ok := files[name]; !ok || f.kind != e.kind {
			if e.path != "" && e.ovpn == nil && !upNow[e.iface] {
				if fileThere(e.path) {
					continue // imported since the scan
				}
				delete(h.entries, name)
				out = append(out, change{snap: *e, tunnels: service.ChangeRemoved})
				continue
			}
			if e.path != "" {
				e.path = "" // running on after its file went
			}
		}
		if e.kind != service.KindWireGuard && e.kind != service.KindGateway {
			continue
		}
		switch up := upNow[e.iface]; {
		case up && e.state != service.StateUp:
			e.state, e.err = service.StateUp, ""
			out = append(out, change{snap: *e, reason: "found running"})
		case !up && e.state == service.StateUp:
			e.state = service.StateDown
			out = append(out, change{snap: *e, reason: "its daemon stopped"})
		}
		if e.path == "" && e.state != service.StateUp {
			delete(h.entries, name)
			out = append(out, change{snap: *e, tunnels: service.ChangeRemoved})
		}
	}
	// Friendly names of the tunnels found up.
	for i := range out {
		c := &out[i]
		if c.snap.state == service.StateUp && c.snap.names == nil && c.snap.path != "" {
			if e := h.entries[c.snap.name]; e != nil {
				e.names = peerNames(e.kind, e.path)
				c.snap.names = e.names
			}
		}
	}
	h.mu.Unlock()
	h.fleetLook(out)
	for i := range out {
		c := &out[i]
		if c.tunnels != "" {
			h.emitTunnels(&c.snap, c.tunnels)
		} else {
			h.emit(&c.snap, c.reason)
		}
	}
}

// fileThere reports whether path exists now. look reads the directories
// before it takes the lock; an Import or Delete in between changed them,
// and what it did must not be undone by the older listing.
func fileThere(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
