package e2e

// wirelane-tray against the real service hosting real WireGuard tunnels
// (the serviceBed of service_test.go).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/dbustest"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// toggleOf finds a tunnel's toggle in the menu.
func toggleOf(t *testing.T, n *dbustest.Node, name string) *dbustest.Node {
	t.Helper()
	e := n.Find(name + " (")
	if e == nil || !e.IsToggle() {
		t.Fatalf("no toggle for %s in:\n%s", name, n.Dump())
	}
	return e
}

// TestTraySwitchesARealTunnel: the tray lists the service's tunnel, a
// click on its toggle (dbusmenu Event) brings it up through the API, the
// menu shows it checked with its details (addresses, the peer's endpoint,
// handshake and transfer), the tooltip names it and a notification says
// it is up; a second click brings it down. Then the service restarts: the
// menu says it is not running, and the tray reconnects by itself. Then the
// tray host (the watcher) restarts: the item registers again.
func TestTraySwitchesARealTunnel(t *testing.T) {
	sb := newServiceBed(t)
	tb := startTray(t, sb.socket, trayOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	m := tb.Wait(t, "the tunnel listed", sb.a+" (WireGuard): down")
	tg := toggleOf(t, m, sb.a)
	if tg.Checked() || !tg.Enabled() {
		t.Fatalf("the down tunnel's toggle: checked %v, enabled %v", tg.Checked(), tg.Enabled())
	}
	tb.Tooltip(t, "no tunnel up")
	if err := tb.Menu.Click(tg); err != nil {
		t.Fatalf("click: %v", err)
	}
	netns.Eventually(t, 20*time.Second, "the click brings the tunnel up", func() error {
		tn, err := sb.c.Get(ctx, sb.a)
		if err != nil {
			return err
		}
		if tn.State != service.StateUp {
			return fmt.Errorf("state %s", tn.State)
		}
		return nil
	})
	tb.Notes.Wait(t, 10*time.Second, sb.a+" is up")
	m = tb.Wait(t, "the tunnel shown up with its details", sb.a+" (WireGuard): up", "Peer: site-b", "Addresses: 10.78.0.1/24")
	if tg := toggleOf(t, m, sb.a); !tg.Checked() {
		t.Errorf("the up tunnel's toggle is not checked:\n%s", m.Dump())
	}
	tb.Tooltip(t, sb.a+" up")
	// Traffic: the peer's handshake and transfer reach the menu.
	netns.Run(t, sb.nsA, "ping", "-c", "3", "-i", "0.3", "-W", "2", "10.78.0.2")
	m = tb.Menu.Wait(t, 20*time.Second, "the handshake and transfer shown", func(n *dbustest.Node) error {
		hs := n.Find("    latest handshake: ")
		if hs == nil || !strings.HasSuffix(hs.Label(), " ago") && hs.Label() != "    latest handshake: just now" {
			return fmt.Errorf("no handshake line")
		}
		tr := n.Find("    transfer: ")
		if tr == nil || strings.HasPrefix(tr.Label(), "    transfer: 0 B received") {
			return fmt.Errorf("no transfer yet")
		}
		if n.Find("    endpoint: 10.77.0.2:10412") == nil {
			return fmt.Errorf("no endpoint")
		}
		return nil
	})
	t.Logf("the menu with the tunnel up:\n%s", m.Dump())

	// Down again with a second click.
	if err := tb.Menu.Click(toggleOf(t, m, sb.a)); err != nil {
		t.Fatal(err)
	}
	netns.Eventually(t, 20*time.Second, "the second click brings the tunnel down", func() error {
		tn, err := sb.c.Get(ctx, sb.a)
		if err != nil {
			return err
		}
		if tn.State != service.StateDown {
			return fmt.Errorf("state %s", tn.State)
		}
		return nil
	})
	m = tb.Wait(t, "the tunnel shown down", sb.a+" (WireGuard): down")
	if m.Find("Peer: site-b") != nil {
		t.Errorf("a down tunnel still has its details:\n%s", m.Dump())
	}
	for _, n := range tb.Notes.All() {
		if strings.Contains(n.Summary, "went down") {
			t.Errorf("a down the user asked for was notified as unexpected: %+v", n)
		}
	}

	// The service restarts.
	sb.stop(t)
	tb.Wait(t, "the menu says the service is not running", "Wirelane: the service is not running")
	tb.Tooltip(t, "not running")
	sb.start(t)
	tb.Wait(t, "the tray reconnected", sb.a+" (WireGuard): down", "Wirelane: no tunnel up")

	// The tray host restarts: a new watcher gets the item again.
	before := len(tb.Watcher.Items())
	tb.Watcher.Stop()
	w2 := dbustest.StartWatcher(t, tb.Bus)
	it := w2.WaitItem(t, 10*time.Second)
	if it.Bus != tb.Item.Bus || before == 0 {
		t.Errorf("re-registered as %+v, first as %+v", it, tb.Item)
	}
	tb.Menu = dbustest.MenuOf(t, tb.Conn, it)
	tb.Wait(t, "the menu after the host's restart", sb.a+" (WireGuard): down")
	tb.Alive(t)
}

// TestTrayReadOnly: run as a user who is neither root nor in the
// service's group, the tray says it is not permitted and why (the
// service's message), offers no toggle, and import is off.
func TestTrayReadOnly(t *testing.T) {
	sb := newServiceBed(t)
	// The socket's directories must let the other user reach it (the
	// socket itself is 0666).
	for d := sb.dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	tb := startTray(t, sb.socket, trayOpts{cred: &syscall.Credential{Uid: 65534, Gid: 65534}})
	m := tb.Wait(t, "the read-only menu", "Wirelane: read-only, not permitted", "permission denied: uid 65534")
	for _, c := range m.Children {
		if c.IsToggle() {
			t.Errorf("a toggle in the read-only menu:\n%s", m.Dump())
		}
	}
	if imp := m.Find("Import tunnel from file"); imp == nil || imp.Enabled() {
		t.Errorf("import is not there, or not disabled:\n%s", m.Dump())
	}
	tb.Tooltip(t, "not permitted")
}

// TestTrayManyTunnelsAndOddNames: a hundred tunnels keep the menu usable
// (ten inline, the rest in "More tunnels" submenus of at most 25), and a
// name with the odd characters a name may hold reads right (dbusmenu's
// "_" access-key marker escaped).
func TestTrayManyTunnelsAndOddNames(t *testing.T) {
	sb := newServiceBed(t)
	k, _ := wgtypes.GeneratePrivateKey()
	conf := []byte("[Interface]\nPrivateKey = " + k.String() + "\nAddress = 10.90.0.1/24\n")
	names := []string{"my_vpn=a+b.c-d"}
	for i := range 100 {
		names = append(names, fmt.Sprintf("t%03d", i))
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(sb.dir, "wireguard", n+".conf"), conf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tb := startTray(t, sb.socket, trayOpts{})
	m := tb.Menu.Wait(t, 20*time.Second, "102 tunnels in the menu", func(n *dbustest.Node) error {
		toggles := 0
		var walk func(*dbustest.Node)
		walk = func(n *dbustest.Node) {
			for _, c := range n.Children {
				if c.IsToggle() {
					toggles++
				}
				walk(c)
			}
		}
		walk(n)
		if toggles != 102 {
			return fmt.Errorf("%d toggles", toggles)
		}
		return nil
	})
	inline, more := 0, 0
	for _, c := range m.Children {
		if c.IsToggle() {
			inline++
		}
		if strings.HasPrefix(c.Label(), "More tunnels") {
			more++
			if len(c.Children) > 25 {
				t.Errorf("%q holds %d entries", c.Label(), len(c.Children))
			}
		}
	}
	if inline != 10 || more != 4 {
		t.Errorf("%d toggles inline and %d More submenus, want 10 and 4:\n%s", inline, more, m.Dump())
	}
	odd := m.Find("my_vpn=a+b.c-d (WireGuard): down")
	if odd == nil || !strings.HasPrefix(odd.RawLabel(), "my__vpn=a+b.c-d") {
		t.Errorf("the odd name's entry: %+v\n%s", odd, m.Dump())
	}
	// The odd name switches like any other.
	if err := tb.Menu.Click(odd); err != nil {
		t.Fatal(err)
	}
	tb.Wait(t, "the odd-named tunnel up", "my_vpn=a+b.c-d (WireGuard): up")
	netns.Eventually(t, 10*time.Second, "the odd-named tunnel up in the API", func() error {
		tn, err := sb.c.Get(context.Background(), names[0])
		if err != nil || tn.State != service.StateUp {
			return fmt.Errorf("%+v, %v", tn.State, err)
		}
		return nil
	})
	sb.c.Down(context.Background(), names[0])
}

// TestTrayImport: "Import tunnel from file…" through the portal's file
// chooser sends the file to the service: a bad file gives a notification
// with the service's FILE:LINE message, a good one a new tunnel in the
// menu. Without a portal, zenity chooses the file.
func TestTrayImport(t *testing.T) {
	sb := newServiceBed(t)
	tb := startTray(t, sb.socket, trayOpts{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken.conf")
	os.WriteFile(bad, []byte("[Interface]\nPrivateKey = x\nListenPort = banana\n"), 0o600)
	tb.Portal.Answer("file://" + bad)
	// Once connected (the entry is off until then).
	m := tb.Menu.Wait(t, 20*time.Second, "the import entry on", func(n *dbustest.Node) error {
		if e := n.Find("Import tunnel from file"); e == nil || !e.Enabled() {
			return fmt.Errorf("no import entry that is on")
		}
		return nil
	})
	if err := tb.Menu.Click(m.Find("Import tunnel from file")); err != nil {
		t.Fatal(err)
	}
	n := tb.Notes.Wait(t, 15*time.Second, "Could not import broken")
	if !strings.Contains(n.Body, "broken.conf:") {
		t.Errorf("the failed import's notification has no FILE:LINE: %+v", n)
	}
	k, _ := wgtypes.GeneratePrivateKey()
	good := filepath.Join(dir, "newone.conf")
	os.WriteFile(good, []byte("[Interface]\nPrivateKey = "+k.String()+"\nAddress = 10.91.0.1/24\n"), 0o600)
	tb.Portal.Answer("file://" + good)
	m = tb.Wait(t, "the import entry", "Import tunnel from file")
	if err := tb.Menu.Click(m.Find("Import tunnel from file")); err != nil {
		t.Fatal(err)
	}
	tb.Notes.Wait(t, 15*time.Second, "Imported newone")
	tb.Wait(t, "the imported tunnel listed", "newone (WireGuard): down")
	if tb.Portal.Calls() != 2 || strings.Contains(tb.ZenityLog(), "file-selection") {
		t.Errorf("portal calls %d, zenity log %q: want the portal used", tb.Portal.Calls(), tb.ZenityLog())
	}

	// No portal: zenity.
	tz := startTray(t, sb.socket, trayOpts{noPortal: true})
	other := filepath.Join(dir, "viazenity.conf")
	os.WriteFile(other, []byte("[Interface]\nPrivateKey = "+k.String()+"\nAddress = 10.92.0.1/24\n"), 0o600)
	os.WriteFile(filepath.Join(tz.ZenityDir, "file"), []byte(other+"\n"), 0o644)
	m = tz.Wait(t, "the import entry, connected", "Import tunnel from file", "newone (WireGuard)")
	if err := tz.Menu.Click(m.Find("Import tunnel from file")); err != nil {
		t.Fatal(err)
	}
	tz.Notes.Wait(t, 15*time.Second, "Imported viazenity")
	if !strings.Contains(tz.ZenityLog(), "--file-selection") {
		t.Errorf("zenity was not asked: %q", tz.ZenityLog())
	}
}

// TestTrayAnswersCredentials: an OpenVPN client whose file holds no
// credentials, switched on from the tray, against a real OpenVPN 2.6
// server that checks them: the tray notifies that it needs credentials,
// asks (the zenity stand-in answers as the user would), sends them
// through the API, and the tunnel comes up and carries traffic.
func TestTrayAnswersCredentials(t *testing.T) {
	sb, name := newAuthBed(t)
	tb := startTray(t, sb.socket, trayOpts{})
	os.WriteFile(filepath.Join(tb.ZenityDir, "password"), []byte("alice|s3cret\n"), 0o644)
	m := tb.Wait(t, "the OpenVPN tunnel listed", name+" (OpenVPN client): down")
	if err := tb.Menu.Click(toggleOf(t, m, name)); err != nil {
		t.Fatal(err)
	}
	tb.Notes.Wait(t, 20*time.Second, name+" needs credentials")
	tb.Notes.Wait(t, 30*time.Second, name+" is up")
	tb.Wait(t, "the tunnel up in the menu", name+" (OpenVPN client): up")
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.9.0.1")
	log := tb.ZenityLog()
	if !strings.Contains(log, "--password --username") || !strings.Contains(log, "--text=Enter OTP") || strings.Contains(log, "--hide-text") {
		t.Errorf("the dialogs asked (want a password dialog, then the shown challenge):\n%s", log)
	}
	if _, err := sb.c.Down(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb.Output(), "s3cret") || strings.Contains(tb.Output(), "424242") {
		t.Errorf("the tray logged the credentials:\n%s", tb.Output())
	}
}

// TestTrayNotifiesAnUnexpectedDown: a tunnel whose daemon dies behind the
// tray's back is notified as gone down with the service's reason, and its
// toggle turns off; one brought down on request is not notified.
func TestTrayNotifiesAnUnexpectedDown(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb := startTray(t, sb.socket, trayOpts{})
	tb.Wait(t, "the tunnel listed", sb.a+" (WireGuard): down")
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatal(err)
	}
	tb.Wait(t, "the tunnel up", sb.a+" (WireGuard): up")
	stopDaemon(t, sb.nsA, sb.a)
	n := tb.Notes.Wait(t, 15*time.Second, sb.a+" went down")
	if !strings.Contains(n.Body, "its daemon stopped") {
		t.Errorf("the notification does not say why: %+v", n)
	}
	m := tb.Wait(t, "the tunnel down", sb.a+" (WireGuard): down")
	if toggleOf(t, m, sb.a).Checked() {
		t.Errorf("the toggle is still on:\n%s", m.Dump())
	}
	tb.Tooltip(t, "no tunnel up")
}
