package server

// A client's timers, once a second: hand-window before the first push,
// then keepalive ping after ping seconds of send silence, ping-restart
// (twice the pushed value, as OpenVPN servers wait) after silence from
// the client, renegotiation at reneg-sec or the packet-id limit, and
// expiry of the lame-duck key.

import (
	"time"

	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/data"
)

// run runs the timers until the peer closes.
func (p *peer) run() {
	defer p.s.wg.Done()
	tick := time.NewTicker(p.s.opts.Timers.Tick())
	defer tick.Stop()
	for {
		select {
		case <-p.closed:
			return
		case now := <-tick.C:
			p.tick(now)
		}
	}
}

func (p *peer) tick(now time.Time) {
	cfg := p.cfg.Load()
	p.mu.Lock()
	established := !p.since.IsZero()
	busy := p.busy > 0
	p.mu.Unlock()
	reneg := p.keys.RenegDue(now)
	if !established {
		if now.Sub(p.created) > p.s.handWindow {
			p.close("TLS handshake or key exchange did not finish within hand-window")
		}
		return
	}
	if cfg.Ping > 0 && mono.Since(p.lastSend.Load(), now) >= time.Duration(cfg.Ping)*time.Second {
		_ = p.sendData(data.PingPayload)
	}
	if cfg.PingRestart > 0 && mono.Since(p.lastRecv.Load(), now) >= 2*time.Duration(cfg.PingRestart)*time.Second {
		p.close("inactivity timeout (ping-restart)")
		return
	}
	if ch := p.data.Load(); ch != nil {
		ch.DropSecondary(now, p.s.opts.TransitionWindow)
		if k := ch.Primary(); k != nil && k.NeedsRekey() {
			reneg = true
		}
	}
	// The old key state's control channel goes with its data key, a
	// transition window after it stopped sending.
	p.keys.ExpireLame(p.ctrl, now, p.s.opts.TransitionWindow)
	// Not while a key exchange is in progress (busy, or one the client
	// just started that no goroutine runs yet, which StartNext refuses):
	// the deadline stays due and the next tick tries again, unless that
	// exchange's new key set a fresh one.
	if !reneg {
		return
	}
	if busy {
		p.s.log.Debug("renegotiation deferred", "client", p.label(), "err", "a key exchange is in progress")
		return
	}
	ks, err := p.keys.StartNext(p.ctrl)
	if err != nil {
		p.s.log.Debug("renegotiation deferred", "client", p.label(), "err", err)
		return
	}
	p.s.log.Info("renegotiating", "client", p.label(), "key", ks.ID)
	p.goKeyState(ks, false)
}
