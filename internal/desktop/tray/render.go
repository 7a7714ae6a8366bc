package tray

import (
	"strings"

	"fyne.io/systray"
)

// renderer puts the model's menu into systray. While the menu's shape (the
// keys and kinds, in order) stays the same it updates entries in place,
// so an open menu stays open as the counters and "seconds ago" tick; a new
// shape rebuilds the menu. It is used from one goroutine only.
type renderer struct {
	shape   string
	entries map[string]*systray.MenuItem
	shown   map[string]Item
	onClick func(key string)
}

func newRenderer(onClick func(key string)) *renderer {
	return &renderer{onClick: onClick, entries: map[string]*systray.MenuItem{}, shown: map[string]Item{}}
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

func (r *renderer) render(items []Item) {
	if s := Shape(items); s != r.shape {
		systray.ResetMenu()
		r.entries = map[string]*systray.MenuItem{}
		r.shown = map[string]Item{}
		r.build(nil, items)
		r.shape = s
		return
	}
	r.update(items)
}

func (r *renderer) build(parent *systray.MenuItem, items []Item) {
	for _, it := range items {
		if it.Kind == Separator {
			if parent == nil {
				systray.AddSeparator()
			} else {
				parent.AddSeparator()
			}
			continue
		}
		label := MenuText(it.Label)
		var mi *systray.MenuItem
		switch {
		case it.Kind == Toggle && parent == nil:
			mi = systray.AddMenuItemCheckbox(label, "", it.Checked)
		case it.Kind == Toggle:
			mi = parent.AddSubMenuItemCheckbox(label, "", it.Checked)
		case parent == nil:
			mi = systray.AddMenuItem(label, "")
		default:
			mi = parent.AddSubMenuItem(label, "")
		}
		if !it.Enabled && it.Kind != Submenu {
			mi.Disable()
		}
		r.entries[it.Key] = mi
		r.shown[it.Key] = it
		if it.Kind == Toggle || it.Kind == Action {
			go func(key string, ch chan struct{}) {
				for range ch {
					r.onClick(key)
				}
			}(it.Key, mi.ClickedCh)
		}
		if it.Kind == Submenu {
			r.build(mi, it.Children)
		}
	}
}

func (r *renderer) update(items []Item) {
	for _, it := range items {
		if it.Kind == Separator {
			continue
		}
		mi, old := r.entries[it.Key], r.shown[it.Key]
		if mi == nil {
			continue
		}
		if it.Label != old.Label {
			mi.SetTitle(MenuText(it.Label))
		}
		if it.Kind == Toggle && it.Checked != old.Checked {
			if it.Checked {
				mi.Check()
			} else {
				mi.Uncheck()
			}
		}
		if it.Kind != Submenu && it.Enabled != old.Enabled {
			if it.Enabled {
				mi.Enable()
			} else {
				mi.Disable()
			}
		}
		r.shown[it.Key] = it
		if it.Kind == Submenu {
			r.update(it.Children)
		}
	}
}
