package dbustest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Node is one entry of a dbusmenu as GetLayout shows it.
type Node struct {
	ID       int32
	Props    map[string]dbus.Variant
	Children []*Node
}

// Label is the entry's label with the access-key escapes undone ("__" is
// a "_", a single "_" marks the key).
func (n *Node) Label() string {
	s, _ := n.Props["label"].Value().(string)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' {
			if i+1 < len(s) && s[i+1] == '_' {
				b.WriteByte('_')
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// RawLabel is the label as sent.
func (n *Node) RawLabel() string { s, _ := n.Props["label"].Value().(string); return s }

// Enabled is false when the entry is greyed out.
func (n *Node) Enabled() bool {
	v, ok := n.Props["enabled"]
	if !ok {
		return true
	}
	b, _ := v.Value().(bool)
	return b
}

// Visible is false for a hidden entry.
func (n *Node) Visible() bool {
	v, ok := n.Props["visible"]
	if !ok {
		return true
	}
	b, _ := v.Value().(bool)
	return b
}

// Checked tells whether a checkmark entry is on.
func (n *Node) Checked() bool {
	v, _ := n.Props["toggle-state"].Value().(int32)
	if v == 0 {
		if i, ok := n.Props["toggle-state"].Value().(int); ok {
			return i == 1
		}
	}
	return v == 1
}

// IsToggle tells whether the entry is a checkmark.
func (n *Node) IsToggle() bool {
	s, _ := n.Props["toggle-type"].Value().(string)
	return s == "checkmark"
}

// IsSeparator tells whether the entry is a separator.
func (n *Node) IsSeparator() bool { s, _ := n.Props["type"].Value().(string); return s == "separator" }

// Find returns the first visible entry, depth first, whose label starts
// with prefix, or nil.
func (n *Node) Find(prefix string) *Node {
	for _, c := range n.Children {
		if !c.Visible() {
			continue
		}
		if strings.HasPrefix(c.Label(), prefix) {
			return c
		}
		if f := c.Find(prefix); f != nil {
			return f
		}
	}
	return nil
}

// Dump renders the tree, one entry a line, for failure messages.
func (n *Node) Dump() string {
	var b strings.Builder
	var walk func(*Node, int)
	walk = func(n *Node, depth int) {
		for _, c := range n.Children {
			if !c.Visible() {
				continue
			}
			mark := ""
			switch {
			case c.IsSeparator():
				mark = "-----"
			case c.IsToggle() && c.Checked():
				mark = "[x] "
			case c.IsToggle():
				mark = "[ ] "
			}
			dis := ""
			if !c.Enabled() && !c.IsSeparator() {
				dis = " (disabled)"
			}
			fmt.Fprintf(&b, "%s%s%s%s\n", strings.Repeat("  ", depth), mark, c.Label(), dis)
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// Count returns how many visible entries the tree holds, at any depth.
func (n *Node) Count() int {
	k := 0
	for _, c := range n.Children {
		if c.Visible() {
			k += 1 + c.Count()
		}
	}
	return k
}

// Menu reads a dbusmenu.
type Menu struct {
	Conn *dbus.Conn
	Bus  string
	Path dbus.ObjectPath
}

// MenuOf finds the menu of a registered item through its Menu property.
func MenuOf(t testing.TB, c *dbus.Conn, it Item) *Menu {
	t.Helper()
	v, err := c.Object(it.Bus, it.Path).GetProperty("org.kde.StatusNotifierItem.Menu")
	if err != nil {
		t.Fatalf("the item's Menu property: %v", err)
	}
	p, ok := v.Value().(dbus.ObjectPath)
	if !ok {
		t.Fatalf("the item's Menu property is %T", v.Value())
	}
	return &Menu{Conn: c, Bus: it.Bus, Path: p}
}

// Layout reads the whole menu with com.canonical.dbusmenu.GetLayout, as a
// panel shows it: hidden entries (visible false) are left out.
// (fyne.io/systray answers the first call after a rebuild one level
// deep, for libdbusmenu-gtk's sake, so it reads twice.)
func (m *Menu) Layout() (*Node, error) {
	var root *Node
	for range 2 {
		var rev uint32
		var raw []any
		call := m.Conn.Object(m.Bus, m.Path).Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{})
		if call.Err != nil {
			return nil, call.Err
		}
		if len(call.Body) != 2 {
			return nil, fmt.Errorf("GetLayout answered %d values", len(call.Body))
		}
		rev, _ = call.Body[0].(uint32)
		_ = rev
		raw, _ = call.Body[1].([]any)
		n, err := node(raw)
		if err != nil {
			return nil, err
		}
		root = n
	}
	return root, nil
}

func node(raw []any) (*Node, error) {
	if len(raw) != 3 {
		return nil, fmt.Errorf("a layout entry of %d fields", len(raw))
	}
	n := &Node{}
	n.ID, _ = raw[0].(int32)
	n.Props, _ = raw[1].(map[string]dbus.Variant)
	kids, _ := raw[2].([]dbus.Variant)
	for _, k := range kids {
		kr, ok := k.Value().([]any)
		if !ok {
			return nil, fmt.Errorf("a child of %T", k.Value())
		}
		c, err := node(kr)
		if err != nil {
			return nil, err
		}
		if !c.Visible() {
			continue // as a panel shows it (the tray hides entries it reuses later)
		}
		n.Children = append(n.Children, c)
	}
	return n, nil
}

// Wait reads the menu until ok accepts it, failing after d with the last
// menu read.
func (m *Menu) Wait(t testing.TB, d time.Duration, what string, ok func(*Node) error) *Node {
	t.Helper()
	var last *Node
	Eventually(t, d, what, func() error {
		n, err := m.Layout()
		if err != nil {
			return err
		}
		last = n
		if err := ok(n); err != nil {
			return fmt.Errorf("%v; the menu:\n%s", err, n.Dump())
		}
		return nil
	})
	return last
}

// Click clicks the entry that shows e's label (com.canonical.dbusmenu
// Event "clicked", as a panel sends it) once that entry has kept its place
// and label for half a second: the tray reuses entries for other items,
// moves items to other entries as the menu changes, and drops a click that
// lands just after an entry's reuse (a user's click there may have been
// meant for its old item).
func (m *Menu) Click(e *Node) error {
	const settle = 500 * time.Millisecond
	label := e.Label()
	var id int32 = -1
	since := time.Now()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := m.Layout()
		if err != nil {
			return err
		}
		f := n.Find(label)
		if f == nil || f.Label() != label {
			if time.Now().After(deadline) {
				return fmt.Errorf("no entry %q in the menu:\n%s", label, n.Dump())
			}
			id = -1
			continue
		}
		if f.ID != id {
			id, since = f.ID, time.Now()
		}
		if time.Since(since) >= settle || time.Now().After(deadline) {
			return m.ClickNow(id)
		}
	}
}

// ClickNow sends com.canonical.dbusmenu.Event(id, "clicked") at once.
func (m *Menu) ClickNow(id int32) error {
	return m.Conn.Object(m.Bus, m.Path).Call("com.canonical.dbusmenu.Event", 0, id, "clicked", dbus.MakeVariant(int32(0)), uint32(time.Now().Unix())).Err
}

// Tooltip reads the item's tooltip title.
func Tooltip(c *dbus.Conn, it Item) (string, error) {
	v, err := c.Object(it.Bus, it.Path).GetProperty("org.kde.StatusNotifierItem.ToolTip")
	if err != nil {
		return "", err
	}
	f, ok := v.Value().([]any)
	if !ok || len(f) < 3 {
		return "", fmt.Errorf("ToolTip is %T", v.Value())
	}
	s, _ := f[2].(string)
	return s, nil
}

// IconWidth reads the width of the item's first icon pixmap (0 = none).
func IconWidth(c *dbus.Conn, it Item) (int32, error) {
	v, err := c.Object(it.Bus, it.Path).GetProperty("org.kde.StatusNotifierItem.IconPixmap")
	if err != nil {
		return 0, err
	}
	px, ok := v.Value().([][]any)
	if !ok || len(px) == 0 {
		return 0, fmt.Errorf("IconPixmap is %T", v.Value())
	}
	w, _ := px[0][0].(int32)
	return w, nil
}
