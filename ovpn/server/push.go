package server

// The PUSH_REPLY a client gets for its PUSH_REQUEST (the configured push
// options, then what the server itself decides: route-gateway, topology,
// ping, addresses, peer-id, cipher, protocol-flags), split with
// push-continuation when long, and the RESTART a cc-exit client gets
// when the server shuts down.

import (
	"fmt"
	"strings"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
)

// pushOptions builds the options of the client's PUSH_REPLY.
func (p *peer) pushOptions() []string {
	s := p.s
	// The configuration in force when the reply goes out (a reload
	// applies to the clients that ask after it); the client's timers
	// follow the same values.
	// So is the client-config entry (its push, push-reset and
	// push-remove); pushed routes that are its own iroutes are left out.
	cn := p.commonName()
	s.mu.RLock()
	l := s.live.Load()
	opts := ccdPush(l.clientConfig(cn).PushOptions(l.cfg.Push), p.iroutes)
	s.mu.RUnlock()
	p.cfg.Store(&l.cfg)
	cfg := &l.cfg
	p.mu.Lock()
	defer p.mu.Unlock()
	if cfg.Network.IsValid() {
		opts = append(opts, "route-gateway "+l.pool.server.String())
	}
	opts = append(opts, "topology subnet")
	if cfg.Ping > 0 {
		opts = append(opts, fmt.Sprintf("ping %d", cfg.Ping))
	}
	if cfg.PingRestart > 0 {
		opts = append(opts, fmt.Sprintf("ping-restart %d", cfg.PingRestart))
	}
	if a6 := p.vaddr6Load(); a6.IsValid() {
		opts = append(opts, fmt.Sprintf("ifconfig-ipv6 %s/%d %s", a6, l.pool6.network.Bits(), l.pool6.server))
	}
	if a := p.vaddrLoad(); a.IsValid() {
		opts = append(opts, fmt.Sprintf("ifconfig %s %s", a, maskString(l.pool.network.Bits())))
	}
	if p.dataV2 {
		opts = append(opts, fmt.Sprintf("peer-id %d", p.id))
	}
	opts = append(opts, "cipher "+p.cipher.String())
	var flags []string
	if p.ccExit {
		flags = append(flags, "cc-exit")
	}
	if p.ekm {
		flags = append(flags, "tls-ekm")
	}
	if len(flags) > 0 {
		opts = append(opts, "protocol-flags "+strings.Join(flags, " "))
	}
	return opts
}

// maxPushMessage keeps each PUSH_REPLY part well inside one control
// message, as OpenVPN splits long replies.
const maxPushMessage = 1024

// pushMessages joins options into PUSH_REPLY messages, split with
// push-continuation when they do not fit one.
func pushMessages(opts []string) []string {
	var parts [][]string
	cur, size := []string(nil), len("PUSH_REPLY")
	const contLen = len(",push-continuation 2")
	for _, o := range opts {
		if len(cur) > 0 && size+1+len(o)+contLen > maxPushMessage {
			parts = append(parts, cur)
			cur, size = nil, len("PUSH_REPLY")
		}
		cur = append(cur, o)
		size += 1 + len(o)
	}
	parts = append(parts, cur)
	msgs := make([]string, len(parts))
	for i, part := range parts {
		m := "PUSH_REPLY," + strings.Join(part, ",")
		if len(parts) > 1 {
			if i < len(parts)-1 {
				m += ",push-continuation 2"
			} else {
				m += ",push-continuation 1"
			}
		}
		msgs[i] = m
	}
	return msgs
}

// push answers a PUSH_REQUEST on the key state a.
func (p *peer) push(a *control.Active) error {
	// Connected from before the reply goes out: the client may send data
	// (and a caller may list clients) as soon as it has read the reply.
	p.mu.Lock()
	first := p.since.IsZero()
	if first {
		p.since = time.Now()
	}
	p.mu.Unlock()
	for _, m := range pushMessages(p.pushOptions()) {
		if err := control.WriteMessage(a.Conn, m); err != nil {
			if first {
				p.mu.Lock()
				p.since = time.Time{} // not connected after all; the next PUSH_REQUEST tries again
				p.mu.Unlock()
			}
			return err
		}
	}
	if first {
		info := p.info()
		p.s.log.Info("connected", "client", p.label(), "address", info.addresses(), "peer-id", info.PeerID, "cipher", info.Cipher.String())
		if p.s.opts.Events != nil {
			p.s.opts.Events(Event{Kind: ClientConnected, Client: info})
		}
	}
	return nil
}

// notifyRestart tells a cc-exit client that the server goes away, waiting
// up to d for the acknowledgement.
func (p *peer) notifyRestart(d time.Duration) {
	p.mu.Lock()
	cc := p.ccExit
	p.mu.Unlock()
	kc := p.keys.Primary()
	if kc == nil || !cc {
		return
	}
	msg := "RESTART"
	if p.s.live.Load().cfg.ExplicitExitNotify == 2 {
		msg = "RESTART,[N]" // reconnect to the next server, not this one
	}
	if err := control.WriteMessage(kc.Conn, msg); err != nil {
		return
	}
	deadline := time.Now().Add(d)
	for !kc.KS.Idle() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}
