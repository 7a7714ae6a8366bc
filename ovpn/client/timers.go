package client

// Once a second: keepalive ping after `ping` seconds of send silence,
// ping-restart after silence from the server, renegotiation when reneg-sec
// or the packet-id limit is reached (deferred while a key exchange is in
// progress, the server's or ours), expiry of the lame-duck key, and a
// summary of dropped packets (never one log line per packet: anyone can
// send them).

import (
	"context"
	"errors"
	"time"

	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
)

// timers runs until the session ends.
func (s *Session) timers() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Timers.Tick())
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			s.tick(now)
		}
	}
}

func (s *Session) tick(now time.Time) {
	s.mu.Lock()
	ping, restart := s.cfg.Ping, s.cfg.PingRestart
	if s.push != nil {
		if s.push.Ping > 0 {
			ping = s.push.Ping
		}
		if s.push.PingRestart > 0 {
			restart = s.push.PingRestart
		}
	}
	s.mu.Unlock()
	reneg := s.keys.RenegDue(now)
	if ping > 0 && mono.Since(s.lastSend.Load(), now) >= time.Duration(ping)*time.Second {
		if err := s.sendData(data.PingPayload); err != nil {
			s.log.Warn("keepalive", "err", err)
		}
	}
	if restart > 0 && mono.Since(s.lastRecv.Load(), now) >= time.Duration(restart)*time.Second {
		s.fail(ErrPingRestart)
		return
	}
	if ch := s.data.Load(); ch != nil {
		ch.DropSecondary(now, s.opts.TransitionWindow)
		k := ch.Primary()
		if k != nil && k.NeedsRekey() {
			reneg = true
		}
		if reneg && k != nil && !k.Heard() {
			// Not before the server sends under the last key (it
			// activates it on our ack): a renegotiation overlapping
			// the server's activation of the last one would push out
			// the key the server still sends with. Its keepalive
			// comes within ping seconds.
			reneg = false
		}
	}
	s.keys.ExpireLame(s.ctrl, now, s.opts.TransitionWindow)
	s.logDrops(now)
	if reneg {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
			defer cancel()
			err := s.renegotiate(ctx, false)
			switch {
			case errors.Is(err, control.ErrKeyStateBusy):
				// The server's renegotiation (or ours) is under way: the
				// deadline stays due, and the next tick tries again
				// unless that exchange's new key set a fresh one.
				s.log.Debug("renegotiation deferred", "err", err)
			case err != nil:
				s.log.Warn("renegotiation", "err", err)
			}
		}()
	}
}

// dropSummaryEvery is the shortest interval between two summaries of
// dropped packets.
const dropSummaryEvery = 30 * time.Second

// logDrops logs how many packets were dropped since the last summary,
// if any were and the last summary is old enough.
func (s *Session) logDrops(now time.Time) {
	ctl, dat := s.droppedControl.Load(), s.droppedData.Load()
	if ctl+dat == s.dropsLogged || now.Sub(s.dropsLoggedAt) < dropSummaryEvery {
		return
	}
	s.log.Info("dropped packets that failed their checks", "count", ctl+dat-s.dropsLogged, "control total", ctl, "data total", dat)
	s.dropsLogged, s.dropsLoggedAt = ctl+dat, now
}
