package dbustest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// Item is a registered StatusNotifierItem: the bus name that owns it and
// its object path.
type Item struct {
	Bus  string
	Path dbus.ObjectPath
}

// Watcher is a fake org.kde.StatusNotifierWatcher: it records the items
// that register, as a panel's watcher does, and shows nothing.
type Watcher struct {
	conn *dbus.Conn

	mu    sync.Mutex
	items []Item // guarded by mu
}

// watcherName is the watcher's well-known name and interface.
const watcherName = "org.kde.StatusNotifierWatcher"

// StartWatcher claims org.kde.StatusNotifierWatcher on its own connection.
func StartWatcher(t testing.TB, b *Bus) *Watcher {
	t.Helper()
	c, err := dbus.Connect(b.Address)
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{conn: c}
	t.Cleanup(w.Stop)
	err = c.ExportMethodTable(map[string]any{
		"RegisterStatusNotifierItem": func(sender dbus.Sender, service string) *dbus.Error {
			it := Item{Bus: string(sender), Path: "/StatusNotifierItem"}
			if strings.HasPrefix(service, "/") {
				it.Path = dbus.ObjectPath(service)
			} else if service != "" {
				it.Bus = service
			}
			w.mu.Lock()
			w.items = append(w.items, it)
			w.mu.Unlock()
			c.Emit("/StatusNotifierWatcher", watcherName+".StatusNotifierItemRegistered", it.Bus+string(it.Path))
			return nil
		},
		"RegisterStatusNotifierHost": func(string) *dbus.Error { return nil },
	}, "/StatusNotifierWatcher", watcherName)
	if err != nil {
		t.Fatal(err)
	}
	_, err = prop.Export(c, "/StatusNotifierWatcher", prop.Map{watcherName: {
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitTrue},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatal(err)
	}
	claim(t, c, watcherName)
	return w
}

// Stop leaves the bus, as a panel that exits does.
func (w *Watcher) Stop() { w.conn.Close() }

// Items returns the registrations seen, oldest first.
func (w *Watcher) Items() []Item {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Item(nil), w.items...)
}

// WaitItem waits for a registration and returns the latest.
func (w *Watcher) WaitItem(t testing.TB, d time.Duration) Item {
	t.Helper()
	var it Item
	Eventually(t, d, "a StatusNotifierItem registers with the watcher", func() error {
		items := w.Items()
		if len(items) == 0 {
			return fmt.Errorf("no registration")
		}
		it = items[len(items)-1]
		return nil
	})
	return it
}
