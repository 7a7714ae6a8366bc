package tray

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/godbus/dbus/v5"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
)

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 5 << 20: "5.00 MiB", 3 << 40: "3.00 TiB", ^uint64(0): "16.00 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		-5 * time.Second:                "just now",
		500 * time.Millisecond:          "just now",
		time.Second:                     "1 second ago",
		12 * time.Second:                "12 seconds ago",
		65 * time.Second:                "1 minute, 5 seconds ago",
		time.Hour:                       "1 hour ago",
		3*time.Hour + 2*time.Minute + 9: "3 hours, 2 minutes ago",
		49 * time.Hour:                  "2 days, 1 hour ago",
		48*time.Hour + 30*time.Second:   "2 days ago",
	} {
		if got := Ago(now.Add(-d), now); got != want {
			t.Errorf("Ago(-%v) = %q, want %q", d, got, want)
		}
	}
}

func TestClipAndEscapes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"a\nb\tc", 10, "a b c"},
		{"ünï", 2, "ü…"},
		{"bad\xffbyte", 20, "bad?byte"},
	} {
		if got := Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	if got := MenuText("my_vpn__x"); got != "my__vpn____x" {
		t.Errorf("MenuText: %q", got)
	}
	if got := MarkupText("<b>a & b</b>"); got != "&lt;b&gt;a &amp; b&lt;/b&gt;" {
		t.Errorf("MarkupText: %q", got)
	}
}

// testState is a service with wg0 up (one peer, a handshake 12 s ago) and
// office down.
func testState(now time.Time) *State {
	s := NewState()
	s.Link = LinkUp
	hs := now.Add(-12 * time.Second)
	ep := netip.MustParseAddrPort("192.0.2.1:51820")
	s.Tunnels["wg0"] = &service.Tunnel{Name: "wg0", Kind: service.KindWireGuard, State: service.StateUp, ListenPort: 51820,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}, RxBytes: 1229, TxBytes: 5683,
		Peers: []service.Peer{{PublicKey: "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=", Name: "Alice's phone", Endpoint: &ep, LatestHandshake: &hs, RxBytes: 1229, TxBytes: 5683}}}
	s.Tunnels["office"] = &service.Tunnel{Name: "office", Kind: service.KindOpenVPNClient, State: service.StateDown}
	return s
}

// labels flattens a menu into "KIND LABEL" lines, indented by depth.
func labels(items []Item) string {
	var b strings.Builder
	var walk func([]Item, int)
	walk = func(items []Item, d int) {
		for _, it := range items {
			mark := map[Kind]string{Text: "text", Toggle: "off", Action: "act", Submenu: "sub", Separator: "----"}[it.Kind]
			if it.Kind == Toggle && it.Checked {
				mark = "on"
			}
			if !it.Enabled && (it.Kind == Toggle || it.Kind == Action) {
				mark += "(disabled)"
			}
			fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", d), mark, it.Label)
			walk(it.Children, d+1)
		}
	}
	walk(items, 0)
	return b.String()
}

func TestBuildMenu(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	got := labels(Build(testState(now), now, Options{Root: true}))
	want := `text Wirelane: 1 of 2 tunnels up
---- 
off office (OpenVPN client): down
on wg0 (WireGuard): up
sub     wg0: 10.9.0.1/24
  text Addresses: 10.9.0.1/24
  text Listening on port 51820
  text Transfer: 1.20 KiB received, 5.55 KiB sent
  text Peer: Alice's phone
  text     endpoint: 192.0.2.1:51820
  text     latest handshake: 12 seconds ago
  text     transfer: 1.20 KiB received, 5.55 KiB sent
act Import tunnel from file…
act Quit
`
	if got != want {
		t.Errorf("the menu:\n%s\nwant:\n%s", got, want)
	}
	// Not root: import is off and says why.
	if got := labels(Build(testState(now), now, Options{})); !strings.Contains(got, "act(disabled) Import tunnel from file… (root only)") {
		t.Errorf("the menu for a non-root user:\n%s", got)
	}
}

func TestBuildWithoutService(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		link    Link
		problem string
		want    []string
	}{
		{LinkConnecting, "", []string{"text Wirelane: connecting to the service…", "act(disabled) Import"}},
		{LinkDown, "dial unix /run/wirelane/wirelane.sock: connect: no such file or directory", []string{"text Wirelane: the service is not running (retrying)", "text dial unix"}},
		{LinkForbidden, `permission denied: uid 1000 is neither root nor a member of group "wirelane"`, []string{"text Wirelane: read-only, not permitted", "text permission denied: uid 1000 is neither root nor a member of", `text group "wirelane"`, "text Ask an administrator"}},
	} {
		s := testState(now)
		s.Lost(c.link, c.problem)
		got := labels(Build(s, now, Options{Root: true}))
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("link %d: no %q in:\n%s", c.link, w, got)
			}
		}
		if strings.Contains(got, "wg0") {
			t.Errorf("link %d: tunnels listed without a service:\n%s", c.link, got)
		}
		if IconFor(s) == IconUp {
			t.Errorf("link %d: the up icon", c.link)
		}
	}
	s := testState(now)
	s.ReadOnly = "permission denied: only root may do this (you are uid 1000)"
	got := labels(Build(s, now, Options{Root: true}))
	for _, w := range []string{"text Read-only: the service refused a change", "text permission denied: only root", "off(disabled) office", "on(disabled) wg0", "act(disabled) Import"} {
		if !strings.Contains(got, w) {
			t.Errorf("read-only: no %q in:\n%s", w, got)
		}
	}
}

func TestBuildOverflow(t *testing.T) {
	now := time.Now()
	s := NewState()
	s.Link = LinkUp
	for i := range 100 {
		n := fmt.Sprintf("t%03d", i)
		s.Tunnels[n] = &service.Tunnel{Name: n, Kind: service.KindWireGuard, State: service.StateDown}
	}
	s.Tunnels["t099"].State = service.StateUp
	m := Build(s, now, Options{Root: true})
	var inline []string
	var more []Item
	for _, it := range m {
		if it.Kind == Toggle {
			inline = append(inline, it.Tunnel)
		}
		if it.Kind == Submenu && strings.HasPrefix(it.Label, "More tunnels") {
			more = append(more, it)
		}
	}
	if len(inline) != 10 || inline[9] != "t099" || inline[0] != "t000" {
		t.Errorf("inline: %v (want t000..t008 and the up t099)", inline)
	}
	if len(more) != 4 || more[0].Label != "More tunnels: t009 … t033" || len(more[3].Children) != 15 {
		t.Errorf("the overflow:\n%s", labels(more))
	}
	// Few tunnels over the limit: one plain "More tunnels".
	delete(s.Tunnels, "t099")
	for i := 12; i < 99; i++ {
		delete(s.Tunnels, fmt.Sprintf("t%03d", i))
	}
	m = Build(s, now, Options{Root: true})
	if got := labels(m); !strings.Contains(got, "sub More tunnels\n  off t010") {
		t.Errorf("a short overflow:\n%s", got)
	}
}

func TestShapeIsStableWhileOnlyLabelsChange(t *testing.T) {
	now := time.Now()
	s := testState(now)
	a := Shape(Build(s, now, Options{}))
	s.Tunnels["wg0"].RxBytes += 4096
	if b := Shape(Build(s, now.Add(3*time.Second), Options{})); a != b {
		t.Errorf("the shape changed with the counters and the clock")
	}
	s.Tunnels["office"].State = service.StateUp
	if c := Shape(Build(s, now, Options{})); c == a {
		t.Errorf("the shape did not change with a tunnel coming up")
	}
}

func TestApplyNotifies(t *testing.T) {
	now := time.Now()
	s := NewState()
	s.Connected()
	ev := func(name string, st service.State, reason, errMsg string, initial bool) service.Event {
		return service.Event{Type: service.EventTunnel, Tunnel: name, State: st, Reason: reason, Error: errMsg, Initial: initial,
			Status: &service.Tunnel{Name: name, Kind: service.KindWireGuard, State: st, Error: errMsg, Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}}}
	}
	steps := []struct {
		e    service.Event
		want string // the note's summary, "" for none
	}{
		{ev("wg0", service.StateUp, "", "", true), ""},
		{ev("wg1", service.StateDown, "", "", true), ""},
		{ev("wg1", service.StateStarting, "requested", "", false), ""},
		{ev("wg1", service.StateUp, "requested", "", false), "wg1 is up"},
		{ev("wg1", service.StateUp, "requested", "", false), ""},
		{ev("wg1", service.StateStopping, "requested", "", false), ""},
		{ev("wg1", service.StateDown, "requested", "", false), ""},
		{ev("wg0", service.StateDown, "its daemon stopped", "", false), "wg0 went down"},
		{ev("wg0", service.StateFailed, "bring-up failed", "bind: address already in use", false), "wg0 failed"},
		{ev("wg0", service.StateDown, "requested", "", false), ""},
		{service.Event{Type: service.EventAuth, Tunnel: "office", Auth: &service.AuthPrompt{Kind: "password"}}, "office needs credentials"},
		{service.Event{Type: service.EventAuth, Tunnel: "office"}, ""},
		{service.Event{Type: "from-the-future", Tunnel: "wg0"}, ""},
	}
	for i, st := range steps {
		notes := s.Apply(st.e)
		got := ""
		if len(notes) > 0 {
			got = notes[0].Summary
		}
		if got != st.want || len(notes) > 1 {
			t.Errorf("step %d (%s %s): notes %+v, want %q", i, st.e.Tunnel, st.e.State, notes, st.want)
		}
	}
	if n := s.Apply(ev("wg2", service.StateFailed, "", "boom", false)); len(n) != 1 || n[0].Body != "boom" || !n[0].Urgent {
		t.Errorf("failure note: %+v", n)
	}
	if n := s.Apply(ev("wg3", service.StateUp, "", "", false)); len(n) != 1 || n[0].Body != "Addresses: 10.0.0.1/24" {
		t.Errorf("up note: %+v", n)
	}
	// Peers and transfer update the tunnel in place.
	rx, tx := uint64(10), uint64(20)
	s.Apply(service.Event{Type: service.EventPeer, Tunnel: "wg3", Change: service.ChangeHandshake, Peer: &service.Peer{PublicKey: "K", Name: "p"}})
	s.Apply(service.Event{Type: service.EventTransfer, Tunnel: "wg3", RxBytes: &rx, TxBytes: &tx, Transfer: []service.PeerTransfer{{ID: "K", RxBytes: 10, TxBytes: 20}}})
	s.Apply(service.Event{Type: service.EventTransfer, Tunnel: "nope", RxBytes: &rx})
	if w := s.Tunnels["wg3"]; w.RxBytes != 10 || w.TxBytes != 20 || len(w.Peers) != 1 || w.Peers[0].TxBytes != 20 {
		t.Errorf("after peer and transfer: %+v", w)
	}
	s.Apply(service.Event{Type: service.EventTunnels, Tunnel: "wg3", Change: service.ChangeRemoved})
	s.Apply(service.Event{Type: service.EventTunnels, Tunnel: "new", Change: service.ChangeAdded, Status: &service.Tunnel{Name: "new", State: service.StateDown}})
	if _, ok := s.Tunnels["wg3"]; ok || s.Tunnels["new"] == nil {
		t.Errorf("tunnels added and removed: %v", s.Tunnels)
	}
	if Tooltip(s) != "Wirelane: no tunnel up; wg0 failed, wg2 failed" && !strings.HasPrefix(Tooltip(s), "Wirelane: ") {
		t.Errorf("tooltip %q", Tooltip(s))
	}
	s.Apply(service.Event{Type: service.EventStopping})
	if s.Link != LinkDown || s.Problem != "the service is stopping" {
		t.Errorf("after stopping: %d %q", s.Link, s.Problem)
	}
	s.Connected()
	if len(s.Tunnels) != 0 {
		t.Errorf("a new stream kept the old tunnels")
	}
	_ = now
}

func TestIconAndTooltip(t *testing.T) {
	now := time.Now()
	s := testState(now)
	if IconFor(s) != IconUp || Tooltip(s) != "Wirelane: wg0 up" {
		t.Errorf("one up: %d %q", IconFor(s), Tooltip(s))
	}
	s.Tunnels["office"].State = service.StateReconnecting
	if IconFor(s) != IconTrouble || Tooltip(s) != "Wirelane: wg0 up; office reconnecting" {
		t.Errorf("one reconnecting: %d %q", IconFor(s), Tooltip(s))
	}
	s.Tunnels["office"].State = service.StateDown
	s.Tunnels["wg0"].State = service.StateDown
	if IconFor(s) != IconIdle || Tooltip(s) != "Wirelane: no tunnel up" {
		t.Errorf("none up: %d %q", IconFor(s), Tooltip(s))
	}
	seen := map[string]bool{}
	for _, i := range []Icon{IconIdle, IconUp, IconTrouble} {
		b := IconPNG(i)
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != iconSize || img.Bounds().Dy() != iconSize {
			t.Errorf("icon %d: %v %v", i, err, img.Bounds())
		}
		seen[string(b)] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d different icons, want 3", len(seen))
	}
}

func TestImportRequestFor(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	for _, c := range []struct {
		file, text string
		kind       service.Kind
		err        string
	}{
		{"wg0.conf", "[Interface]\n", service.KindWireGuard, ""},
		{"site.toml", "[interface]\n", service.KindGateway, ""},
		{"office.ovpn", "client\nremote a 1194\n<ca>\nserver in a cert comment\n</ca>\n", service.KindOpenVPNClient, ""},
		{"hq.ovpn", "# a server\nport 1194\nserver 10.8.0.0 255.255.255.0\n", service.KindOpenVPNServer, ""},
		{"hq2.OVPN", "mode server\n", service.KindOpenVPNServer, ""},
		{"notes.txt", "x", "", "not a tunnel file"},
		{"far too long a name.conf", "x", "", "cannot name a tunnel"},
	} {
		req, err := ImportRequestFor(write(c.file, c.text))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.file) {
				t.Errorf("%s: %v, want an error naming the file with %q", c.file, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.file, err)
		case req.Kind != c.kind || req.Config != c.text || req.Name+filepath.Ext(c.file) != c.file:
			t.Errorf("%s: %+v", c.file, req)
		}
	}
	if _, err := ImportRequestFor(write("big.conf", strings.Repeat("#", maxImport+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a large file: %v", err)
	}
	if _, err := ImportRequestFor(filepath.Join(dir, "missing.conf")); err == nil {
		t.Errorf("a missing file imported")
	}
}

func TestParsePasswordDialog(t *testing.T) {
	for in, want := range map[string][2]string{
		"alice|secret\n":  {"alice", "secret"},
		"alice|se|cret\n": {"alice", "se|cret"},
		"|\n":             {"", ""},
		"justpass\n":      {"", "justpass"},
		"":                {"", ""},
	} {
		u, p := ParsePasswordDialog(in)
		if u != want[0] || p != want[1] {
			t.Errorf("ParsePasswordDialog(%q) = %q, %q", in, u, p)
		}
	}
}

func TestPortalResult(t *testing.T) {
	ok := map[string]dbus.Variant{"uris": dbus.MakeVariant([]string{"file:///home/a/my%20vpn.conf"})}
	if p, err := portalResult([]any{uint32(0), ok}); err != nil || p != "/home/a/my vpn.conf" {
		t.Errorf("a chosen file: %q, %v", p, err)
	}
	if _, err := portalResult([]any{uint32(1), map[string]dbus.Variant{}}); err != ErrCancelled {
		t.Errorf("cancel: %v", err)
	}
	for _, body := range [][]any{
		nil,
		{uint32(2), map[string]dbus.Variant{}},
		{"zero", ok},
		{uint32(0), map[string]dbus.Variant{}},
		{uint32(0), map[string]dbus.Variant{"uris": dbus.MakeVariant([]string{"https://example.com/x.conf"})}},
		{uint32(0), map[string]dbus.Variant{"uris": dbus.MakeVariant(42)}},
	} {
		if p, err := portalResult(body); err == nil || err == ErrCancelled {
			t.Errorf("portalResult(%v) = %q, %v: want an error", body, p, err)
		}
	}
}

// checkLabels fails on a label a panel should not get.
func checkLabels(t *testing.T, items []Item) {
	for _, it := range items {
		if utf8.RuneCountInString(it.Label) > maxLabel+8 || !utf8.ValidString(it.Label) || strings.ContainsFunc(it.Label, unicode.IsControl) {
			t.Fatalf("label %q", it.Label)
		}
		checkLabels(t, it.Children)
	}
}

// FuzzApply feeds event lines, as a service (or anything on its socket)
// might send, to the state and builds the menu: never a panic, every label
// short and clean, the shape well formed.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"type":"tunnel","tunnel":"wg0","state":"up","initial":true,"status":{"name":"wg0","kind":"wireguard","state":"up","addresses":["10.0.0.1/24"],"peers":[{"public_key":"K","latest_handshake":"2026-12-01T19:40:12Z","rx_bytes":1}]}}
{"type":"transfer","tunnel":"wg0","rx_bytes":5,"tx_bytes":6,"peers":[{"id":"K","rx_bytes":5,"tx_bytes":6}]}
{"type":"peer","tunnel":"wg0","change":"handshake","peer":{"public_key":"J","endpoint":"192.0.2.1:1"}}`))
	f.Add([]byte(`{"type":"tunnel","tunnel":"a\nb","state":"failed","error":"x\u001by"}
{"type":"auth","tunnel":"o","auth":{"kind":"challenge","prompt":"\u0000"}}
{"type":"tunnels","change":"removed","tunnel":"a\nb"}
{"type":"stopping"}`))
	f.Add([]byte(`{"type":"tunnel","status":{"name":"","peers":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewState()
		s.Connected()
		now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
		for _, line := range bytes.Split(data, []byte("\n")) {
			var e service.Event
			if jsonUnmarshal(line, &e) != nil {
				continue
			}
			for _, n := range s.Apply(e) {
				if !utf8.ValidString(n.Summary) || strings.ContainsFunc(n.Summary, unicode.IsControl) {
					t.Fatalf("note summary %q", n.Summary)
				}
			}
		}
		m := Build(s, now, Options{Root: true, Inline: 3, PerSubmenu: 2})
		checkLabels(t, m)
		_ = Tooltip(s)
		_ = IconFor(s)
		_ = Shape(m)
	})
}

// FuzzParsePasswordDialog: whatever zenity prints, the parse returns, and
// a username without "|" comes back as it went in.
func FuzzParsePasswordDialog(f *testing.F) {
	f.Add("alice", "se|cret")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, user, pass string) {
		if strings.Contains(user, "|") || strings.ContainsAny(pass, "\r\n") {
			ParsePasswordDialog(user + "|" + pass + "\n")
			return
		}
		u, p := ParsePasswordDialog(user + "|" + pass + "\n")
		if u != user || p != pass {
			t.Fatalf("(%q, %q) came back as (%q, %q)", user, pass, u, p)
		}
	})
}

// jsonUnmarshal is encoding/json's, as the client decodes event lines.
var jsonUnmarshal = json.Unmarshal

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "the service closed the event stream"},
		{&client.Error{Status: 403, Msg: "permission denied: x"}, "permission denied: x"},
		{&url.Error{Op: "Get", URL: "http://wirelane/v1/events", Err: &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}}, "no service socket (is wirelaned running?)"},
		{&url.Error{Op: "Get", URL: "http://wirelane/v1/events", Err: &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, "the service's socket refuses connections (is wirelaned running?)"},
		{&url.Error{Op: "Get", URL: "http://wirelane/v1/events", Err: errors.New("net/http: HTTP/1.x transport connection broken: malformed HTTP response")}, "net/http: HTTP/1.x transport connection broken: malformed HTTP response"},
	} {
		if got := describe(c.err); got != c.want {
			t.Errorf("describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
