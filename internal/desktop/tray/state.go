package tray

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
)

// Link is how the tray stands with the service.
type Link int

// The links to the service.
const (
	// LinkConnecting: no answer yet (the tray just started).
	LinkConnecting Link = iota
	// LinkUp: the event stream is open and the tunnels are current.
	LinkUp
	// LinkDown: the service does not answer (not running, restarting, or
	// it answered something that is not the API); the tray retries.
	LinkDown
	// LinkForbidden: the service refused the tray (403): the user is
	// neither root nor in the service's group.
	LinkForbidden
)

// State is what the tray knows of the service: the tunnels as the event
// stream last showed them and how the link stands. It is a plain value
// with no locking of its own; the tray holds it under its mutex.
type State struct {
	Link Link
	// Problem says why the link is down or forbidden (the service's
	// message or the connection's error).
	Problem string
	// ReadOnly, when set, says why the tray may not change anything (the
	// service refused an up or a down with 403): the toggles are off.
	ReadOnly string
	// Tunnels are the service's tunnels by name.
	Tunnels map[string]*service.Tunnel
	// Busy holds the tunnels whose up or down the tray has asked for and
	// not yet seen answered.
	Busy map[string]bool
}

// NewState returns the state before the first connection.
func NewState() *State {
	return &State{Tunnels: map[string]*service.Tunnel{}, Busy: map[string]bool{}}
}

// Note is a notification the tray should show.
type Note struct {
	// Key groups notifications that replace each other (one per tunnel).
	Key     string
	Summary string
	Body    string
	// Urgent marks failures (the notification's critical urgency).
	Urgent bool
}

// Connected records that a new event stream opened: its snapshot follows,
// so what was known before is forgotten (a tunnel removed while the tray
// was away must not linger).
func (s *State) Connected() {
	s.Link = LinkUp
	s.Problem = ""
	clear(s.Tunnels)
	clear(s.Busy)
}

// Lost records that the service went away or refused the tray.
func (s *State) Lost(l Link, problem string) {
	s.Link = l
	s.Problem = problem
	clear(s.Busy)
}

// Sorted returns the tunnels sorted by name.
func (s *State) Sorted() []*service.Tunnel {
	out := make([]*service.Tunnel, 0, len(s.Tunnels))
	for _, t := range s.Tunnels {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *service.Tunnel) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Apply follows one event of the stream and returns the notifications it
// deserves: a tunnel that came up, one that went down without being asked
// to, one that failed (with its error), one that needs credentials. The
// snapshot (initial events) never notifies. Events naming no tunnel, or a
// tunnel the tray does not know, change nothing they cannot.
func (s *State) Apply(e service.Event) []Note {
	switch e.Type {
	case service.EventTunnel:
		return s.applyTunnel(e)
	case service.EventTunnels:
		switch e.Change {
		case service.ChangeAdded:
			if e.Status != nil && e.Status.Name != "" {
				t := *e.Status
				s.Tunnels[t.Name] = &t
			}
		case service.ChangeRemoved:
			delete(s.Tunnels, e.Tunnel)
			delete(s.Busy, e.Tunnel)
		}
	case service.EventPeer:
		t := s.Tunnels[e.Tunnel]
		if t == nil || e.Peer == nil {
			return nil
		}
		id := e.Peer.ID()
		for i := range t.Peers {
			if t.Peers[i].ID() == id {
				t.Peers[i] = *e.Peer
				return nil
			}
		}
		t.Peers = append(t.Peers, *e.Peer)
	case service.EventTransfer:
		t := s.Tunnels[e.Tunnel]
		if t == nil {
			return nil
		}
		if e.RxBytes != nil {
			t.RxBytes = *e.RxBytes
		}
		if e.TxBytes != nil {
			t.TxBytes = *e.TxBytes
		}
		for _, pt := range e.Transfer {
			for i := range t.Peers {
				if t.Peers[i].ID() == pt.ID {
					t.Peers[i].RxBytes, t.Peers[i].TxBytes = pt.RxBytes, pt.TxBytes
				}
			}
		}
	case service.EventAuth:
		if e.Auth == nil || e.Tunnel == "" {
			return nil
		}
		body := "Enter your username and password."
		if e.Auth.Kind == "challenge" {
			body = "Answer the challenge."
		}
		if e.Auth.Prompt != "" {
			body += " The server asks: " + Clip(e.Auth.Prompt, 200)
		}
		return []Note{{Key: e.Tunnel, Summary: Clip(e.Tunnel, 40) + " needs credentials", Body: body}}
	case service.EventStopping:
		s.Lost(LinkDown, "the service is stopping")
	}
	return nil
}

func (s *State) applyTunnel(e service.Event) []Note {
	name := e.Tunnel
	if name == "" && e.Status != nil {
		name = e.Status.Name
	}
	if name == "" {
		return nil
	}
	old := s.Tunnels[name]
	var was service.State
	if old != nil {
		was = old.State
	}
	var t service.Tunnel
	if e.Status != nil {
		t = *e.Status
	} else if old != nil {
		t = *old
	}
	t.Name = name
	if e.State != "" {
		t.State = e.State
	}
	if t.State == service.StateFailed && t.Error == "" {
		t.Error = e.Error
	}
	s.Tunnels[name] = &t
	if t.State != service.StateStarting && t.State != service.StateStopping {
		delete(s.Busy, name)
	}
	if e.Initial || t.State == was {
		return nil
	}
	label := Clip(name, 40)
	switch t.State {
	case service.StateUp:
		body := "Connected."
		if a := joinPrefixes(t, 4); a != "none" {
			body = "Addresses: " + a
		}
		return []Note{{Key: name, Summary: label + " is up", Body: body}}
	case service.StateDown:
		if e.Reason == "requested" || was == "" || was == service.StateFailed {
			return nil
		}
		why := e.Reason
		if why == "" {
			why = "no reason given"
		}
		return []Note{{Key: name, Summary: label + " went down", Body: Clip(why, 300), Urgent: true}}
	case service.StateFailed:
		msg := t.Error
		if msg == "" {
			msg = e.Reason
		}
		if msg == "" {
			msg = "no error given"
		}
		return []Note{{Key: name, Summary: label + " failed", Body: Clip(msg, 300), Urgent: true}}
	}
	return nil
}

// joinPrefixes lists up to n of t's addresses, leaving out IPv6
// link-local ones (the kernel's, not the tunnel's).
func joinPrefixes(t service.Tunnel, n int) string {
	var addrs []string
	for _, p := range t.Addresses {
		if !p.Addr().IsLinkLocalUnicast() {
			addrs = append(addrs, p.String())
		}
	}
	if len(addrs) == 0 {
		return "none"
	}
	if len(addrs) > n {
		return strings.Join(addrs[:n], ", ") + fmt.Sprintf(" and %d more", len(addrs)-n)
	}
	return strings.Join(addrs, ", ")
}

// Active reports whether a tunnel's state counts as on for its toggle: up,
// or on its way up, or reconnecting.
func Active(st service.State) bool {
	return st == service.StateUp || st == service.StateStarting || st == service.StateReconnecting
}

// since is how a peer's latest handshake reads in the menu.
func since(p service.Peer, now time.Time) string {
	if p.LatestHandshake == nil || p.LatestHandshake.IsZero() {
		return "latest handshake: never"
	}
	return "latest handshake: " + Ago(*p.LatestHandshake, now)
}
