package tray

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
)

// poolLevel stands for one level of the renderer's pool: what plan would
// make of it, without systray.
type poolLevel struct {
	kinds []slotKind
	subs  map[int]*poolLevel
}

// place does what renderer.level does to the pool, checking that every
// item lands in order on a slot of its sort.
func (l *poolLevel) place(t *testing.T, items []Item, where string) {
	t.Helper()
	want := make([]slotKind, len(items))
	for i, it := range items {
		want[i] = slotKindOf(it.Kind)
	}
	at, grow, ok := plan(l.kinds, want)
	if !ok {
		t.Fatalf("%s: the menu does not fit the pool %v:\n%s", where, l.kinds, labels(items))
	}
	l.kinds = append(l.kinds, grow...)
	for i, it := range items {
		if i > 0 && at[i] <= at[i-1] {
			t.Fatalf("%s: item %d placed at %d, after %d", where, i, at[i], at[i-1])
		}
		if l.kinds[at[i]] != want[i] {
			t.Fatalf("%s: item %q on a slot of kind %d", where, it.Label, l.kinds[at[i]])
		}
		if it.Kind == Submenu {
			if l.subs == nil {
				l.subs = map[int]*poolLevel{}
			}
			if l.subs[at[i]] == nil {
				l.subs[at[i]] = &poolLevel{}
			}
			l.subs[at[i]].place(t, it.Children, where+"/"+it.Key)
		}
	}
}

func (l *poolLevel) size() int {
	n := len(l.kinds)
	for _, s := range l.subs {
		n += s.size()
	}
	return n
}

func count(items []Item) int {
	n := len(items)
	for _, it := range items {
		n += count(it.Children)
	}
	return n
}

// TestPlanFitsEveryMenu renders a long random walk of states (the link
// coming and going, read-only, tunnels added, removed, up with peers,
// failed, many of them for the overflow submenus) into one pool: every
// menu must fit without removing an entry, in order, and the pool must
// stay a small multiple of the largest menu.
func TestPlanFitsEveryMenu(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	s := NewState()
	root := &poolLevel{}
	largest := 0
	states := []service.State{service.StateDown, service.StateUp, service.StateFailed, service.StateReconnecting, service.StateStarting, service.StateStopping}
	for step := range 500 {
		switch r := rng.IntN(100); {
		case r < 3:
			s.Lost(LinkDown, "connection refused")
		case r < 5:
			s.Lost(LinkForbidden, strings.Repeat("permission denied ", rng.IntN(12)))
		case r < 6:
			s.Lost(LinkConnecting, "")
		case r < 7:
			s.Connected() // a new snapshot: no tunnels until they come
		case r < 10:
			s.ReadOnly = map[bool]string{true: "", false: strings.Repeat("refused ", rng.IntN(30))}[s.ReadOnly != ""]
		case r < 20:
			delete(s.Tunnels, fmt.Sprintf("t%02d", rng.IntN(40)))
		default:
			s.Link, s.Problem = LinkUp, ""
			name := fmt.Sprintf("t%02d", rng.IntN(40))
			if rng.IntN(4) == 0 {
				name = fmt.Sprintf("t%02d", rng.IntN(6)) // a few change often
			}
			tun := &service.Tunnel{Name: name, Kind: service.KindWireGuard, State: states[rng.IntN(len(states))], ListenPort: uint16(rng.IntN(2)) * 51820}
			if tun.State == service.StateFailed {
				tun.Error = "boom"
			}
			for range rng.IntN(12) {
				tun.Peers = append(tun.Peers, service.Peer{Name: "p"})
			}
			s.Tunnels[name] = tun
		}
		items := Build(s, now, Options{Root: true, Inline: 10, PerSubmenu: 25})
		largest = max(largest, count(items))
		root.place(t, items, fmt.Sprintf("step %d", step))
	}
	t.Logf("largest menu %d entries, pool %d", largest, root.size())
	if root.size() > 6*largest+50 {
		t.Errorf("the pool grew to %d entries for menus of at most %d", root.size(), largest)
	}
}

// TestPlanSeparators: separators are never skipped nor left over, and
// the level before a new one gets room.
func TestPlanSeparators(t *testing.T) {
	P, C, S, X := slotPlain, slotCheck, slotSub, slotSep
	at, grow, ok := plan(nil, []slotKind{P, X, C, P})
	if !ok || fmt.Sprint(at) != fmt.Sprint([]int{0, 7, 8, 9}) || len(grow) != 11 || grow[7] != X {
		t.Errorf("a first menu: at %v, grow %v, %v", at, grow, ok)
	}
	have := append([]slotKind(nil), grow...)
	if at, _, ok := plan(have, []slotKind{P, P, P, X, S, C}); !ok || at[3] != 7 {
		t.Errorf("more status lines and a submenu: at %v, %v", at, ok)
	}
	if _, _, ok := plan(have, []slotKind{P, C}); ok {
		t.Error("a menu without the separator fitted (it cannot be hidden)")
	}
	if _, _, ok := plan(have, []slotKind{P, P, P, P, P, P, P, P, X}); ok {
		t.Error("eight lines fitted before the separator, in a room of seven")
	}
}
