package tray

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/dbustest"
)

// TestTrayGarbageService: a service that answers a bad event line, then
// something that is not HTTP, leaves the tray up saying the service is not
// running, retrying; once a real stream comes the menu shows it, without
// what the broken stream had shown.
func TestTrayGarbageService(t *testing.T) {
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		switch {
		case r.URL.Path != "/v1/events":
			answer(c, 404, map[string]string{"error": "no"})
		case n == 1:
			streamHead(c)
			send(c, snap("one", service.KindWireGuard, service.StateUp))
			io.WriteString(c, "\x00\xff{{not json at all\n")
		case n == 2:
			io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n\r\n")
			c.Close()
		default:
			streamHead(c)
			send(c, snap("two", service.KindWireGuard, service.StateDown))
		}
	})
	d := dbustest.NewDesktop(t, false)
	tr := startChild(t, d, fs.socket)
	tr.Wait(t, "the last stream's tunnel", "two (WireGuard): down")
	m, _ := tr.Menu.Layout()
	if m.Find("one (") != nil {
		t.Errorf("the broken stream's tunnel is still listed:\n%s", m.Dump())
	}
	if fs.count("/v1/events") < 3 {
		t.Errorf("%d connections, want 3", fs.count("/v1/events"))
	}
	if !strings.Contains(tr.Output(), "event stream") || !strings.Contains(tr.Output(), "malformed HTTP") {
		t.Errorf("the tray did not log the two broken answers:\n%s", tr.Output())
	}
	tr.Alive(t)
}

// TestTrayServiceDisappearsMidStream: the service hangs up in the middle of
// a line, then accepts and never answers: the menu says the service is not
// running and why, and comes back when the service does.
func TestTrayServiceDisappearsMidStream(t *testing.T) {
	hangUp := make(chan struct{})
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		switch n {
		case 1:
			streamHead(c)
			send(c, snap("wg0", service.KindWireGuard, service.StateUp))
			<-hangUp
			io.WriteString(c, `{"type":"tunnel","tunnel":"wg0","sta`)
			c.Close()
		case 2:
			// Never answers (the tray gives up after 5 s).
		default:
			streamHead(c)
			send(c, snap("wg0", service.KindWireGuard, service.StateDown))
		}
	})
	d := dbustest.NewDesktop(t, false)
	tr := startChild(t, d, fs.socket)
	tr.Wait(t, "the tunnel up", "wg0 (WireGuard): up")
	tr.Tooltip(t, "wg0 up")
	close(hangUp)
	tr.Wait(t, "the broken stream noticed", "Wirelane: the service is not running", "the service's event stream broke")
	tr.Tooltip(t, "not running")
	tr.Menu.Wait(t, 20*time.Second, "the silent service noticed", func(n *dbustest.Node) error {
		if n.Find("the service did not answer within 5 s") == nil {
			return fmt.Errorf("no timeout shown")
		}
		return nil
	})
	tr.Wait(t, "back", "wg0 (WireGuard): down")
	tr.Alive(t)
}

// TestTrayHostileNames: names and errors the real service would never
// send (control characters, markup, 500 characters) are shown clipped and
// cleaned, never break the menu, and the notification's body is escaped.
func TestTrayHostileNames(t *testing.T) {
	names := []string{"line\nbreak", "esc\x1b[31mred", strings.Repeat("x", 500), "<b>&amp;", "ünï_cødé", "bad\xffutf8"}
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		streamHead(c)
		for _, nm := range names {
			send(c, snap(nm, service.Kind("weird\tkind"), service.State("sideways")))
		}
		send(c, snap("", service.KindWireGuard, service.StateUp))
		time.Sleep(300 * time.Millisecond)
		send(c, service.Event{Type: service.EventTunnel, Tunnel: "<b>&amp;", State: service.StateFailed,
			Error: "<i>boom</i> & more\nsecond line", Status: &service.Tunnel{Name: "<b>&amp;", State: service.StateFailed, Error: "<i>boom</i> & more\nsecond line"}})
		select {}
	})
	d := dbustest.NewDesktop(t, false)
	tr := startChild(t, d, fs.socket)
	m := tr.Wait(t, "the odd tunnels listed", "line break (", "<b>&amp; (", "ünï_cødé (", "esc")
	var walk func(*dbustest.Node)
	walk = func(n *dbustest.Node) {
		for _, c := range n.Children {
			l := c.Label()
			if utf8.RuneCountInString(l) > maxLabel+4 {
				t.Errorf("label of %d characters: %q", utf8.RuneCountInString(l), l)
			}
			if !utf8.ValidString(l) || strings.ContainsFunc(l, unicode.IsControl) {
				t.Errorf("label with control characters or bad UTF-8: %q", l)
			}
			walk(c)
		}
	}
	walk(m)
	if m.Find("xxxxxxxx") == nil || !strings.Contains(m.Find("xxxxxxxx").Label(), "…") {
		t.Errorf("the long name is not clipped:\n%s", m.Dump())
	}
	n := d.Notes.Wait(t, 10*time.Second, "failed")
	if !strings.Contains(n.Body, "&lt;i&gt;boom&lt;/i&gt; &amp; more second line") {
		t.Errorf("the notification's body is not escaped: %q", n.Body)
	}
	tr.Alive(t)
}

// TestTrayCredentials: an auth event is notified, asked through the dialog
// (a zenity stand-in) and answered through the API: a password prompt with
// the username and password, one giving the username with the password
// alone, a challenge with its response, hidden.
func TestTrayCredentials(t *testing.T) {
	ask := make(chan service.Event)
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		switch r.URL.Path {
		case "/v1/events":
			streamHead(c)
			send(c, snap("office", service.KindOpenVPNClient, service.StateStarting))
			for e := range ask {
				send(c, e)
			}
		case "/v1/tunnels/office/auth":
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		default:
			answer(c, 404, map[string]string{"error": "no"})
		}
	})
	d := dbustest.NewDesktop(t, false)
	tr := startChild(t, d, fs.socket)
	tr.Wait(t, "the tunnel", "office (OpenVPN client): starting")
	ask <- service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "password"}}
	d.Notes.Wait(t, 10*time.Second, "office needs credentials")
	var got service.AuthAnswer
	dbustest.Eventually(t, 10*time.Second, "the answer posted", func() error {
		b := fs.posted("/v1/tunnels/office/auth")
		if b == nil {
			return fmt.Errorf("nothing posted")
		}
		return json.Unmarshal(b, &got)
	})
	if got != (service.AuthAnswer{Username: "alice", Password: "s3cr|et"}) {
		t.Errorf("answered %+v", got)
	}
	// The file gives the username: the dialog asks the password only.
	ask <- service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "password", Username: "bob"}}
	dbustest.Eventually(t, 10*time.Second, "the password alone answered", func() error {
		got = service.AuthAnswer{}
		json.Unmarshal(fs.posted("/v1/tunnels/office/auth"), &got)
		if got != (service.AuthAnswer{Username: "bob", Password: "s3cr|et"}) {
			return fmt.Errorf("answered %+v", got)
		}
		return nil
	})
	ask <- service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "challenge", Prompt: "Token code?"}}
	dbustest.Eventually(t, 10*time.Second, "the challenge answered", func() error {
		got = service.AuthAnswer{}
		json.Unmarshal(fs.posted("/v1/tunnels/office/auth"), &got)
		if got.Response != "424242" {
			return fmt.Errorf("answered %+v", got)
		}
		return nil
	})
	if log := d.ZenityLog(); !strings.Contains(log, "--password --username") ||
		!strings.Contains(log, "--password --title=Wirelane: office (bob)") || !strings.Contains(log, "--text=Token code? --hide-text") {
		t.Errorf("zenity was asked:\n%s", log)
	}
	close(ask)
}

// TestTrayRefusedChange: a service that lists the tunnels but refuses to
// switch one (403) turns the menu read-only, saying why.
func TestTrayRefusedChange(t *testing.T) {
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		switch r.URL.Path {
		case "/v1/events":
			streamHead(c)
			send(c, snap("wg0", service.KindWireGuard, service.StateDown))
			select {}
		default:
			answer(c, 403, map[string]string{"error": `permission denied: uid 1000 is neither root nor a member of group "wirelane"`})
		}
	})
	d := dbustest.NewDesktop(t, false)
	tr := startChild(t, d, fs.socket)
	m := tr.Wait(t, "the tunnel", "wg0 (WireGuard): down")
	if err := tr.Menu.Click(m.Find("wg0 (")); err != nil {
		t.Fatal(err)
	}
	m = tr.Wait(t, "read-only", "Read-only: the service refused a change", "permission denied: uid 1000")
	if tg := m.Find("wg0 ("); tg.Enabled() {
		t.Errorf("the toggle is still enabled:\n%s", m.Dump())
	}
	if fs.count("/v1/tunnels/wg0/up") != 1 {
		t.Errorf("%d ups asked", fs.count("/v1/tunnels/wg0/up"))
	}
}

// TestTrayWaitsForItsHost: a tray started before any panel registers once
// the watcher appears, and again with the next one.
func TestTrayWaitsForItsHost(t *testing.T) {
	fs := newFakeService(t, func(fs *fakeService, c net.Conn, r *http.Request, n int) {
		streamHead(c)
		send(c, snap("wg0", service.KindWireGuard, service.StateDown))
		select {}
	})
	d := dbustest.NewDesktop(t, false)
	d.Watcher.Stop()
	exe, _ := executable(t)
	tr := d.Start(t, exe, "WIRELANE_TRAY_TEST_SOCKET="+fs.socket)
	time.Sleep(500 * time.Millisecond)
	w := dbustest.StartWatcher(t, d.Bus)
	tr.Register(t, w)
	tr.Wait(t, "the menu", "wg0 (WireGuard): down")
	w.Stop()
	w2 := dbustest.StartWatcher(t, d.Bus)
	tr.Register(t, w2)
	tr.Wait(t, "the menu", "wg0 (WireGuard): down")
}
