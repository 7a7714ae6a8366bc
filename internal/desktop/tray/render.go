package tray

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"fyne.io/systray"
)

// The renderer puts the model's menu into systray without ever removing an
// entry. fyne.io/systray's Remove (and ResetMenu, which calls it) closes an
// entry's click channel while a click on it may be being delivered (its
// lookup and its send are not under one lock), which panics the process
// ("send on closed channel"); ResetMenu also starts a refresh that races
// with GetLayout. So the renderer keeps a pool of entries, per menu level,
// in the order systray shows them, and maps each new menu onto it: an
// entry of the right sort is relabelled and shown, the others are hidden,
// and new entries are only ever added at the end of a level. Separators
// cannot be hidden (systray gives no handle on them): a new menu must have
// its separators where the pool has them, which Build guarantees by having
// exactly one, after the status lines.

// slotKind is what sort of systray entry a slot is.
type slotKind int

const (
	slotCheck slotKind = iota // a checkbox entry: a Toggle
	slotPlain                 // a plain entry: Text or Action
	slotSub                   // a plain entry used only as a Submenu
	slotSep                   // a separator
)

func slotKindOf(k Kind) slotKind {
	switch k {
	case Toggle:
		return slotCheck
	case Submenu:
		return slotSub
	case Separator:
		return slotSep
	}
	return slotPlain
}

// segmentRoom is how many spare plain entries a level gets before a new
// separator: entries before a separator cannot be added later (new ones
// go to the end), so the status lines above it need the room from the
// start (Build has at most five).
const segmentRoom = 6

// clickGuard is how long after an entry is reused for another item a
// click on it is ignored: the panel may have sent it for what the entry
// showed before. Switching the wrong tunnel is worse than a lost click.
const clickGuard = 400 * time.Millisecond

// slot is one systray entry of the pool.
type slot struct {
	kind     slotKind
	mi       *systray.MenuItem // nil for a separator
	children []*slot           // slotSub: its submenu's pool

	// guarded by renderer.mu (the click listeners read them):
	key     string    // the item shown, "" when hidden
	changed time.Time // when key last changed from one item to another

	// used by the render goroutine only:
	shown   Item // what it shows, when visible
	visible bool
}

// renderer puts the model's menus into systray's entries. render is called
// from one goroutine only; the click listeners run beside it.
type renderer struct {
	onClick func(key string)
	log     *slog.Logger

	mu   sync.Mutex // guards slot.key and slot.changed
	root []*slot    // the render goroutine's
}

func newRenderer(onClick func(key string), log *slog.Logger) *renderer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &renderer{onClick: onClick, log: log}
}

// Shape is the structure of a menu: its keys and kinds, nested. Two menus
// of the same shape differ only in labels, checks and enabled states.
func Shape(items []Item) string {
	var b strings.Builder
	var walk func([]Item)
	walk = func(items []Item) {
		for _, it := range items {
			b.WriteString(it.Key)
			b.WriteByte(byte('0' + it.Kind))
			if it.Kind == Submenu {
				b.WriteByte('(')
				walk(it.Children)
				b.WriteByte(')')
			}
			b.WriteByte(0)
		}
	}
	walk(items)
	return b.String()
}

// plan maps want (the kinds of a level's new items) onto have (the kinds
// of its pool): at[i] is the slot for want[i], an index into have or,
// from len(have) on, into grow, the slots to add at the end. It fails when
// the separators do not line up: a separator of have would stay unused
// (it cannot be hidden), or an item would have to go before one of have's
// separators where there is no slot for it.
func plan(have, want []slotKind) (at []int, grow []slotKind, ok bool) {
	all := append([]slotKind(nil), have...) // have, then what grows
	c := 0                                  // the next slot that may be used
	for _, w := range want {
		j := c
		for j < len(all) && all[j] != w && (w == slotSep || all[j] != slotSep) {
			j++
		}
		if j < len(all) && all[j] == w {
			at = append(at, j)
			c = j + 1
			continue
		}
		if j < len(all) {
			return nil, nil, false // a separator is in the way
		}
		switch w {
		case slotSep:
			for range segmentRoom {
				all = append(all, slotPlain)
			}
			all = append(all, slotSep)
		case slotCheck:
			// A whole bundle, so that a tunnel's toggle, error line
			// and details fit the same place whatever its state.
			all = append(all, slotCheck, slotPlain, slotSub)
		case slotSub:
			all = append(all, slotSub, slotCheck, slotPlain)
		default:
			all = append(all, slotPlain)
		}
		for j < len(all) && all[j] != w {
			j++
		}
		at = append(at, j)
		c = j + 1
	}
	for _, h := range all[c:] {
		if h == slotSep {
			return nil, nil, false
		}
	}
	return at, all[len(have):], true
}

func (r *renderer) render(items []Item) {
	r.root = r.level(nil, r.root, items)
}

// level renders items into pool, the entries of parent (nil for the
// menu itself), and returns the pool, grown as needed.
func (r *renderer) level(parent *slot, pool []*slot, items []Item) []*slot {
	have := make([]slotKind, len(pool))
	for i, s := range pool {
		have[i] = s.kind
	}
	want := make([]slotKind, len(items))
	for i, it := range items {
		want[i] = slotKindOf(it.Kind)
	}
	at, grow, ok := plan(have, want)
	if !ok {
		// Build never makes such a menu (TestPlanFitsEveryMenu); should
		// it, hide everything and start over at the end, which leaves
		// the old separators showing but never removes an entry.
		r.log.Warn("menu separators moved: rebuilding at the end of the menu")
		for _, s := range pool {
			r.hide(s)
		}
		at, grow = nil, nil
		for _, w := range want {
			at = append(at, len(pool)+len(grow))
			grow = append(grow, w)
		}
	}
	for _, k := range grow {
		pool = append(pool, r.add(parent, k))
	}
	used := make(map[int]bool, len(at))
	for i, it := range items {
		s := pool[at[i]]
		used[at[i]] = true
		if s.kind == slotSep {
			continue
		}
		r.show(s, it)
		if s.kind == slotSub {
			s.children = r.level(s, s.children, it.Children)
		}
	}
	for i, s := range pool {
		if !used[i] {
			r.hide(s)
		}
	}
	return pool
}

// add creates a slot at the end of parent's entries, hidden.
func (r *renderer) add(parent *slot, k slotKind) *slot {
	s := &slot{kind: k}
	switch {
	case k == slotSep && parent == nil:
		systray.AddSeparator()
		return s
	case k == slotSep:
		parent.mi.AddSeparator()
		return s
	case k == slotCheck && parent == nil:
		s.mi = systray.AddMenuItemCheckbox("", "", false)
	case k == slotCheck:
		s.mi = parent.mi.AddSubMenuItemCheckbox("", "", false)
	case parent == nil:
		s.mi = systray.AddMenuItem("", "")
	default:
		s.mi = parent.mi.AddSubMenuItem("", "")
	}
	s.mi.Hide()
	if k != slotSub {
		go r.listen(s)
	}
	return s
}

// listen passes the clicks on s on, for as long as the process runs (the
// channel is never closed: the entry is never removed).
func (r *renderer) listen(s *slot) {
	for range s.mi.ClickedCh {
		r.mu.Lock()
		key, changed := s.key, s.changed
		r.mu.Unlock()
		switch {
		case key == "":
			// Hidden: a click sent before the panel saw the new menu.
		case time.Since(changed) < clickGuard:
			r.log.Debug("click ignored: the entry just changed", "now", key)
		default:
			r.onClick(key)
		}
	}
}

// show makes s show it, changing only what differs from what it shows.
func (r *renderer) show(s *slot, it Item) {
	r.mu.Lock()
	if s.key != it.Key {
		if s.key != "" {
			s.changed = time.Now()
		}
		s.key = it.Key
	}
	r.mu.Unlock()
	old, fresh := s.shown, !s.visible
	if fresh || it.Label != old.Label {
		s.mi.SetTitle(MenuText(it.Label))
	}
	if it.Kind == Toggle && (fresh || it.Checked != old.Checked) {
		if it.Checked {
			s.mi.Check()
		} else {
			s.mi.Uncheck()
		}
	}
	enabled := it.Enabled || it.Kind == Submenu
	if fresh || enabled != (old.Enabled || old.Kind == Submenu) {
		if enabled {
			s.mi.Enable()
		} else {
			s.mi.Disable()
		}
	}
	if fresh {
		s.mi.Show()
		s.visible = true
	}
	s.shown = it
}

// hide hides s (a separator stays) and forgets what it and its submenu
// showed, so that a late click on them does nothing.
func (r *renderer) hide(s *slot) {
	if s.kind == slotSep {
		return
	}
	r.forget(s)
	if s.visible {
		s.mi.Hide()
		s.visible = false
	}
}

func (r *renderer) forget(s *slot) {
	r.mu.Lock()
	s.key = ""
	r.mu.Unlock()
	for _, c := range s.children {
		r.forget(c)
	}
}
