package host

import (
	"context"
	"fmt"

	"github.com/wirelane/wirelane/internal/control/service"
)

// Up brings a tunnel up: starting, then up or failed (with the error,
// which it also returns; the library has undone what it did). A tunnel
// already up is not an error; one being brought up or down is ErrBusy.
func (h *Host) Up(ctx context.Context, name string) error {
	h.mu.Lock()
	e, ok := h.entries[name]
	switch {
	case !ok:
		h.mu.Unlock()
		return fmt.Errorf("%q: %w", name, service.ErrNotFound)
	case e.state == service.StateUp || e.state == service.StateReconnecting:
		h.mu.Unlock()
		return nil
	case e.busy():
		h.mu.Unlock()
		return fmt.Errorf("%q is %s: %w", name, e.state, service.ErrBusy)
	}
	e.state, e.err = service.StateStarting, ""
	snap := *e
	h.mu.Unlock()
	h.emit(&snap, "requested")

	var run *ovpnRun
	var err error
	switch snap.kind {
	case service.KindWireGuard, service.KindGateway:
		err = h.upWireGuard(ctx, &snap)
	default:
		run, err = h.startOVPN(ctx, &snap)
	}
	var names map[string]string
	if err == nil {
		names = peerNames(snap.kind, snap.path)
	}

	h.mu.Lock()
	if err != nil {
		e.state, e.err = service.StateFailed, err.Error()
	} else {
		e.state, e.names, e.ovpn = service.StateUp, names, run
	}
	snap = *e
	h.mu.Unlock()
	if err != nil {
		h.log.Warn("tunnel failed to come up", "tunnel", name, "err", err)
		h.emit(&snap, "up failed")
		return err
	}
	if run != nil {
		go h.watchOVPN(name, run)
	}
	h.emit(&snap, "requested")
	return nil
}

// Down takes a tunnel down: stopping, then down. A tunnel already down
// (or failed: nothing of it is left) is not an error; one being brought
// up or down is ErrBusy. When the library fails and the tunnel is still
// there, it stays up and the error is returned.
func (h *Host) Down(ctx context.Context, name string) error {
	h.mu.Lock()
	e, ok := h.entries[name]
	switch {
	case !ok:
		h.mu.Unlock()
		return fmt.Errorf("%q: %w", name, service.ErrNotFound)
	case e.state == service.StateDown || e.state == service.StateFailed:
		h.mu.Unlock()
		return nil
	case e.busy():
		h.mu.Unlock()
		return fmt.Errorf("%q is %s: %w", name, e.state, service.ErrBusy)
	}
	e.state = service.StateStopping
	snap := *e
	run := e.ovpn
	h.mu.Unlock()
	h.emit(&snap, "requested")

	var err error
	still := false
	switch snap.kind {
	case service.KindWireGuard, service.KindGateway:
		err = h.downWireGuard(&snap)
		still = err != nil && h.wgUp(snap.iface)
	default:
		if run != nil {
			run.stop()
		}
	}

	h.mu.Lock()
	e.ovpn = nil
	reason := "requested"
	if still {
		e.state = service.StateUp
		reason = "down failed"
	} else {
		e.state, e.err = service.StateDown, ""
	}
	snap = *e
	h.mu.Unlock()
	h.emit(&snap, reason)
	if err != nil {
		h.log.Warn("tunnel down", "tunnel", name, "err", err)
		if still {
			return err
		}
	}
	return nil
}

// emit publishes a tunnel event with the tunnel's status (read outside the
// lock, as List does).
func (h *Host) emit(snap *entry, reason string) {
	t := h.tunnelOf(snap)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.publish != nil {
		h.publish(service.Event{Type: service.EventTunnel, Tunnel: snap.name, State: snap.state, Reason: reason, Error: snap.err, Status: &t})
	}
}

// emitTunnels publishes a tunnels event (added with the status, or
// removed).
func (h *Host) emitTunnels(snap *entry, change string) {
	var t *service.Tunnel
	if change == service.ChangeAdded {
		tt := h.tunnelOf(snap)
		t = &tt
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.publish != nil {
		h.publish(service.Event{Type: service.EventTunnels, Tunnel: snap.name, Change: change, Status: t})
	}
}
