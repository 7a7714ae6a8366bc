package dbustest

import (
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
)

// Portal is a fake xdg-desktop-portal offering only the file chooser: each
// OpenFile answers with the file set by Answer (or a cancel when none).
type Portal struct {
	conn *dbus.Conn

	mu     sync.Mutex
	uri    string   // guarded by mu: the next answer ("" = cancelled)
	titles []string // guarded by mu: the OpenFile calls' titles
}

// StartPortal claims org.freedesktop.portal.Desktop on its own connection.
func StartPortal(t testing.TB, b *Bus) *Portal {
	t.Helper()
	c := b.Conn(t)
	p := &Portal{conn: c}
	err := c.ExportMethodTable(map[string]any{
		"OpenFile": func(sender dbus.Sender, parent, title string, opts map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
			tok, _ := opts["handle_token"].Value().(string)
			s := []byte(string(sender)[1:])
			for i := range s {
				if s[i] == '.' {
					s[i] = '_'
				}
			}
			handle := dbus.ObjectPath("/org/freedesktop/portal/desktop/request/" + string(s) + "/" + tok)
			p.mu.Lock()
			uri := p.uri
			p.titles = append(p.titles, title)
			p.mu.Unlock()
			go func() {
				code, res := uint32(1), map[string]dbus.Variant{}
				if uri != "" {
					code = 0
					res["uris"] = dbus.MakeVariant([]string{uri})
				}
				c.Emit(handle, "org.freedesktop.portal.Request.Response", code, res)
			}()
			return handle, nil
		},
	}, "/org/freedesktop/portal/desktop", "org.freedesktop.portal.FileChooser")
	if err != nil {
		t.Fatal(err)
	}
	claim(t, c, "org.freedesktop.portal.Desktop")
	return p
}

// Answer sets the file the next OpenFile chooses ("" = the user cancels).
func (p *Portal) Answer(uri string) {
	p.mu.Lock()
	p.uri = uri
	p.mu.Unlock()
}

// Calls returns how many times OpenFile was called.
func (p *Portal) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.titles)
}
