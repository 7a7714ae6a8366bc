package service

// The poller turns the Host's snapshots into the events a Host does not
// push: peer (handshake established or expired, endpoint changed) and
// transfer (a tunnel's counters, once per interval while they change). It
// reads the Host once per interval and only while someone subscribes; with
// no subscriber it forgets its baseline, so that a new subscriber is not
// told about old changes.

import (
	"context"
	"time"
)

// handshakeLife is how long a WireGuard handshake keeps a session usable
// (RejectAfterTime): a peer without a newer one has expired.
const handshakeLife = 180 * time.Second

// snapshot is one reading of the Host.
type snapshot struct {
	at      time.Time
	names   []string // sorted, as List returns them
	tunnels map[string]*Tunnel
}

func takeSnapshot(h Host, at time.Time) *snapshot {
	s := &snapshot{at: at, tunnels: map[string]*Tunnel{}}
	for _, t := range h.List() {
		s.names = append(s.names, t.Name)
		s.tunnels[t.Name] = &t
	}
	return s
}

// poll runs until ctx is done.
func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var prev *snapshot
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.hub.wake:
			// A first subscriber: take a baseline now rather than at the
			// next tick, so its first transfer event comes one interval on.
		case <-t.C:
		}
		if n, _ := s.hub.stats(); n == 0 {
			prev = nil
			continue
		}
		cur := takeSnapshot(s.host, time.Now())
		if prev != nil {
			for _, e := range diffSnapshots(prev, cur) {
				s.hub.publish(e)
			}
		}
		prev = cur
	}
}

// diffSnapshots returns the peer and transfer events between two readings,
// tunnel by tunnel in cur's order.
func diffSnapshots(prev, cur *snapshot) []Event {
	var out []Event
	at := cur.at.UTC()
	for _, name := range cur.names {
		t := cur.tunnels[name]
		p, ok := prev.tunnels[name]
		if !ok {
			continue // a new tunnel: its tunnels event says so
		}
		old := map[string]*Peer{}
		for i := range p.Peers {
			old[p.Peers[i].ID()] = &p.Peers[i]
		}
		for i := range t.Peers {
			np := &t.Peers[i]
			op := old[np.ID()]
			delete(old, np.ID())
			wasLive := op != nil && live(t.Kind, op, prev.at)
			isLive := live(t.Kind, np, cur.at)
			switch {
			case isLive && !wasLive:
				out = append(out, peerEvent(at, name, ChangeHandshake, np))
			case wasLive && !isLive:
				out = append(out, peerEvent(at, name, ChangeHandshakeExpired, np))
			}
			if op != nil && np.Endpoint != nil && (op.Endpoint == nil || *op.Endpoint != *np.Endpoint) {
				out = append(out, peerEvent(at, name, ChangeEndpoint, np))
			}
		}
		for _, op := range old { // gone (an OpenVPN client left, a peer removed)
			if live(p.Kind, op, prev.at) {
				out = append(out, peerEvent(at, name, ChangeHandshakeExpired, op))
			}
		}
		if t.RxBytes != p.RxBytes || t.TxBytes != p.TxBytes {
			rx, tx := t.RxBytes, t.TxBytes
			e := Event{Type: EventTransfer, Time: at, Tunnel: name, RxBytes: &rx, TxBytes: &tx}
			for i := range t.Peers {
				pp := &t.Peers[i]
				e.Transfer = append(e.Transfer, PeerTransfer{ID: pp.ID(), RxBytes: pp.RxBytes, TxBytes: pp.TxBytes})
			}
			out = append(out, e)
		}
	}
	return out
}

// live reports whether a peer has a usable session at time at: a
// WireGuard peer whose latest handshake is younger than handshakeLife, an
// OpenVPN peer that has completed its handshake (it is listed only while
// connected).
func live(k Kind, p *Peer, at time.Time) bool {
	if p.LatestHandshake == nil {
		return false
	}
	if k == KindOpenVPNClient || k == KindOpenVPNServer {
		return true
	}
	return at.Sub(*p.LatestHandshake) < handshakeLife
}

func peerEvent(at time.Time, tunnel, change string, p *Peer) Event {
	cp := normPeer(*p)
	return Event{Type: EventPeer, Time: at, Tunnel: tunnel, Change: change, Peer: &cp}
}
