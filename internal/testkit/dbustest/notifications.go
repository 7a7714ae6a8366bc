package dbustest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Notification is one Notify call the fake daemon received.
type Notification struct {
	App, Summary, Body string
	ReplacesID         uint32
	Hints              map[string]dbus.Variant
}

// Notifications is a fake org.freedesktop.Notifications daemon: it
// records every notification and shows none.
type Notifications struct {
	mu   sync.Mutex
	got  []Notification // guarded by mu
	next uint32         // guarded by mu
}

// StartNotifications claims org.freedesktop.Notifications on its own
// connection.
func StartNotifications(t testing.TB, b *Bus) *Notifications {
	t.Helper()
	c := b.Conn(t)
	n := &Notifications{}
	err := c.ExportMethodTable(map[string]any{
		"Notify": func(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.got = append(n.got, Notification{App: app, Summary: summary, Body: body, ReplacesID: replaces, Hints: hints})
			if replaces != 0 {
				return replaces, nil
			}
			n.next++
			return n.next, nil
		},
		"GetCapabilities":   func() ([]string, *dbus.Error) { return []string{"body"}, nil },
		"CloseNotification": func(uint32) *dbus.Error { return nil },
		"GetServerInformation": func() (string, string, string, string, *dbus.Error) {
			return "dbustest", "wirelane", "0", "1.2", nil
		},
	}, "/org/freedesktop/Notifications", "org.freedesktop.Notifications")
	if err != nil {
		t.Fatal(err)
	}
	claim(t, c, "org.freedesktop.Notifications")
	return n
}

// All returns the notifications received, oldest first.
func (n *Notifications) All() []Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Notification(nil), n.got...)
}

// Wait waits for a notification whose summary contains summary and
// returns it.
func (n *Notifications) Wait(t testing.TB, d time.Duration, summary string) Notification {
	t.Helper()
	var found Notification
	Eventually(t, d, fmt.Sprintf("a notification %q", summary), func() error {
		var seen []string
		for _, x := range n.All() {
			if strings.Contains(x.Summary, summary) {
				found = x
				return nil
			}
			seen = append(seen, x.Summary)
		}
		return fmt.Errorf("seen: %q", seen)
	})
	return found
}
