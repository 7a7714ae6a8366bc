package tray

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"

	"github.com/godbus/dbus/v5"
)

// The XDG desktop portal's file chooser.
const (
	portalName    = "org.freedesktop.portal.Desktop"
	portalPath    = "/org/freedesktop/portal/desktop"
	portalChooser = "org.freedesktop.portal.FileChooser"
	portalRequest = "org.freedesktop.portal.Request"
)

// ErrCancelled is returned when the user closed a dialog without choosing.
var ErrCancelled = errors.New("cancelled")

// Dialogs runs the tray's dialogs: the file chooser (the desktop portal,
// else zenity) and the credential prompts (zenity).
type Dialogs struct {
	// Conn is the session bus (nil: zenity only).
	Conn *dbus.Conn
	// Zenity is the zenity program ("" = "zenity" on PATH).
	Zenity string
}

func (d *Dialogs) zenity() string {
	if d.Zenity != "" {
		return d.Zenity
	}
	return "zenity"
}

// PickFile asks the user for a tunnel file to import and returns its path:
// through org.freedesktop.portal.FileChooser when a portal answers, else
// through zenity. ErrCancelled when the user chose nothing.
func (d *Dialogs) PickFile(ctx context.Context) (string, error) {
	if d.Conn != nil {
		p, err := d.portalPick(ctx)
		if err == nil || errors.Is(err, ErrCancelled) {
			return p, err
		}
		var derr dbus.Error
		if !errors.As(err, &derr) && !errors.Is(err, errNoPortal) {
			return "", err
		}
	}
	out, err := d.run(ctx, "--file-selection", "--title=Import a Wirelane tunnel",
		"--file-filter=Tunnel files (.conf .toml .ovpn) | *.conf *.toml *.ovpn", "--file-filter=All files | *")
	if err != nil {
		return "", err
	}
	return strings.TrimRight(out, "\r\n"), nil
}

// errNoPortal: the portal is not on the bus.
var errNoPortal = errors.New("no desktop portal on the session bus")

func (d *Dialogs) portalPick(ctx context.Context) (string, error) {
	conn := d.Conn
	var has bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, portalName).Store(&has); err != nil {
		return "", err
	}
	if !has {
		var act []string
		_ = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.ListActivatableNames", 0).Store(&act)
		found := false
		for _, n := range act {
			found = found || n == portalName
		}
		if !found {
			return "", errNoPortal
		}
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	token := "wirelane" + hex.EncodeToString(tok[:])
	sender := strings.ReplaceAll(strings.TrimPrefix(conn.Names()[0], ":"), ".", "_")
	want := dbus.ObjectPath(portalPath + "/request/" + sender + "/" + token)
	ch := make(chan *dbus.Signal, 8)
	conn.Signal(ch)
	defer conn.RemoveSignal(ch)
	match := []dbus.MatchOption{dbus.WithMatchInterface(portalRequest), dbus.WithMatchMember("Response")}
	if err := conn.AddMatchSignal(match...); err != nil {
		return "", err
	}
	defer conn.RemoveMatchSignal(match...)
	type filter struct {
		Name     string
		Patterns []struct {
			Kind    uint32
			Pattern string
		}
	}
	f := filter{Name: "Tunnel files (.conf .toml .ovpn)"}
	for _, p := range []string{"*.conf", "*.toml", "*.ovpn"} {
		f.Patterns = append(f.Patterns, struct {
			Kind    uint32
			Pattern string
		}{0, p})
	}
	opts := map[string]dbus.Variant{
		"handle_token": dbus.MakeVariant(token),
		"modal":        dbus.MakeVariant(true),
		"multiple":     dbus.MakeVariant(false),
		"filters":      dbus.MakeVariant([]filter{f}),
	}
	var handle dbus.ObjectPath
	if err := conn.Object(portalName, portalPath).CallWithContext(ctx, portalChooser+".OpenFile", 0, "", "Import a Wirelane tunnel", opts).Store(&handle); err != nil {
		return "", err
	}
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case sig, ok := <-ch:
			if !ok {
				return "", errors.New("the session bus closed")
			}
			if sig.Name != portalRequest+".Response" || (sig.Path != want && sig.Path != handle) {
				continue
			}
			return portalResult(sig.Body)
		}
	}
}

// portalResult reads a Request.Response signal's body: (u response,
// a{sv} results) with results["uris"] the chosen files.
func portalResult(body []any) (string, error) {
	if len(body) < 2 {
		return "", fmt.Errorf("the portal's answer has %d values, want 2", len(body))
	}
	code, ok := body[0].(uint32)
	if !ok {
		return "", fmt.Errorf("the portal's answer: response is %T, want uint32", body[0])
	}
	switch code {
	case 0:
	case 1:
		return "", ErrCancelled
	default:
		return "", fmt.Errorf("the file chooser failed (portal response %d)", code)
	}
	res, _ := body[1].(map[string]dbus.Variant)
	v, ok := res["uris"]
	if !ok {
		return "", errors.New("the portal answered no file")
	}
	uris, ok := v.Value().([]string)
	if !ok || len(uris) == 0 {
		return "", errors.New("the portal answered no file")
	}
	u, err := url.Parse(uris[0])
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", fmt.Errorf("the portal answered %q, not a local file", Clip(uris[0], 100))
	}
	return u.Path, nil
}

// run runs zenity with args and returns what it printed; its exit status
// 1 (Cancel, or the window closed) is ErrCancelled.
func (d *Dialogs) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.zenity(), args...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return "", ErrCancelled
	}
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("no dialog program: install zenity (%w)", err)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", d.zenity(), err)
	}
	return string(out), nil
}
