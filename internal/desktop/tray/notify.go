package tray

import (
	"context"
	"sync"

	"github.com/godbus/dbus/v5"
)

// The notification service (the Desktop Notifications Specification).
const (
	notifyName  = "org.freedesktop.Notifications"
	notifyPath  = "/org/freedesktop/Notifications"
	notifyIface = "org.freedesktop.Notifications"
)

// Notifier shows Notes through org.freedesktop.Notifications, each
// replacing the previous one of its Key (a tunnel's "up" replaces its
// "starting"-era notification rather than piling up).
type Notifier struct {
	conn *dbus.Conn

	mu  sync.Mutex
	ids map[string]uint32 // guarded by mu: Key -> the server's id
}

// NewNotifier returns a Notifier on conn.
func NewNotifier(conn *dbus.Conn) *Notifier {
	return &Notifier{conn: conn, ids: map[string]uint32{}}
}

// Notify shows n. It returns the server's error, if any (no notification
// daemon on the bus is an error the tray logs once and otherwise ignores).
func (nt *Notifier) Notify(ctx context.Context, n Note) error {
	nt.mu.Lock()
	replaces := nt.ids[n.Key]
	nt.mu.Unlock()
	urgency := byte(1)
	if n.Urgent {
		urgency = 2
	}
	hints := map[string]dbus.Variant{
		"urgency":       dbus.MakeVariant(urgency),
		"desktop-entry": dbus.MakeVariant("wirelane-tray"),
	}
	var id uint32
	err := nt.conn.Object(notifyName, notifyPath).CallWithContext(ctx, notifyIface+".Notify", 0,
		"Wirelane", replaces, "network-vpn", n.Summary, MarkupText(n.Body), []string{}, hints, int32(-1)).Store(&id)
	if err != nil {
		return err
	}
	if n.Key != "" {
		nt.mu.Lock()
		nt.ids[n.Key] = id
		nt.mu.Unlock()
	}
	return nil
}
