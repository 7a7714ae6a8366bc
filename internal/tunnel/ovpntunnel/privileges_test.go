package ovpntunnel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/sys/privdrop"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/config"
)

// An unknown user or group stops connect and serve at once, with the
// file and line, before anything is dialled or set up.
func TestUnknownUserOrGroupIsAnErrorWithItsLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ lines, want string }{
		{"user no-such-user-privdrop\n", "c.ovpn:3: user: user \"no-such-user-privdrop\": no such user or group"},
		{"user root\ngroup no-such-group-privdrop\n", "c.ovpn:4: group: group \"no-such-group-privdrop\": no such user or group"},
	} {
		file := filepath.Join(dir, "c.ovpn")
		// The remote is a TEST-NET address: a dial would hang, not fail.
		text := "client\nremote 192.0.2.1 1194\n" + tc.lines + testpki.FixtureInline
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		errOut := capture(t)
		if code := Connect(ConnectOptions{File: file, MTU: 1500}); code != 1 {
			t.Errorf("%q: exit %d, want 1", tc.lines, code)
		}
		if got := strings.TrimSpace(errOut.String()); !strings.HasSuffix(got, tc.want) || strings.Contains(got, "connecting") {
			t.Errorf("%q: output %q, want it to end in %q", tc.lines, got, tc.want)
		}
	}
}

func TestDropTarget(t *testing.T) {
	tg, err := dropTarget("f", &config.Common{})
	if err != nil || !tg.Empty() {
		t.Fatalf("no user or group: %+v, %v", tg, err)
	}
	tg, err = dropTarget("f", &config.Common{User: "root", UserLine: 2})
	if err != nil || tg.UID != 0 || tg.GID != 0 {
		t.Fatalf("user root: %+v, %v", tg, err)
	}
}

// Inside the service, and with the DNS held by resolvconf, the drop is
// not made, and a warning says why.
func TestDropPrivilegesSkipped(t *testing.T) {
	tg, err := privdrop.Lookup("nobody", "")
	if err != nil {
		t.Skip(err)
	}
	uid := os.Getuid()
	for _, tc := range []struct {
		hosted bool
		by     netcfg.Resolver
		want   string
	}{
		{true, "", "not applied: the tunnel runs inside wirelaned"},
		{false, netcfg.Resolvconf, "not applied: the DNS servers are registered with resolvconf"},
	} {
		var warned []string
		warnf := func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
		if err := dropPrivileges(tg, tc.hosted, tc.by, nil, warnf); err != nil {
			t.Fatal(err)
		}
		if len(warned) != 1 || !strings.Contains(warned[0], tc.want) || os.Getuid() != uid {
			t.Errorf("hosted %v, DNS by %q: warnings %q, uid %d", tc.hosted, tc.by, warned, os.Getuid())
		}
	}
	// Inside the service an unknown name is no error: nothing is dropped.
	names, err := dropTarget("c.ovpn", &config.Common{User: "no-such-user-privdrop", UserLine: 3})
	if err == nil {
		t.Fatal("unknown user: no error")
	}
	var warned []string
	if err := dropPrivileges(names, true, "", nil, func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }); err != nil ||
		len(warned) != 1 || !strings.HasPrefix(warned[0], "user/group (user no-such-user-privdrop) not applied: the tunnel runs inside wirelaned") {
		t.Errorf("hosted, unknown user: %v, %q", err, warned)
	}
}

// After keepOpen the status file is rewritten in place: shorter text is
// padded (still JSON, the new values), and a long tail of padding is cut.
func TestStatusRewrittenInPlace(t *testing.T) {
	old := StatusDir
	StatusDir = t.TempDir()
	t.Cleanup(func() { StatusDir = old })
	clients := make([]ClientStatus, 60)
	snap := func() TunnelStatus { return TunnelStatus{Kind: KindServer, Interface: "wlx0", Clients: clients} }
	p, err := publishStatus(snap, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	fi0, _ := os.Stat(p.path)
	if err := p.keepOpen(); err != nil {
		t.Fatal(err)
	}
	read := func() (TunnelStatus, int64) {
		b, err := os.ReadFile(p.path)
		if err != nil {
			t.Fatal(err)
		}
		var st TunnelStatus
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b)
		}
		return st, int64(len(b))
	}
	clients = clients[:58]
	if err := p.write(); err != nil {
		t.Fatal(err)
	}
	st, size := read()
	if len(st.Clients) != 58 || size != fi0.Size() {
		t.Fatalf("after a small shrink: %d clients, %d bytes (was %d)", len(st.Clients), size, fi0.Size())
	}
	fi1, _ := os.Stat(p.path)
	if !os.SameFile(fi0, fi1) {
		t.Fatal("the file was replaced, not rewritten")
	}
	clients = nil
	if err := p.write(); err != nil {
		t.Fatal(err)
	}
	if st, size = read(); len(st.Clients) != 0 || size > 1024 {
		t.Fatalf("after a large shrink: %d clients, %d bytes", len(st.Clients), size)
	}
}

// A client reload does not list user/group (or their lines moving) as
// settings for the next reconnect: the drop is made once, at the start.
func TestReloadLeavesUserGroupToTheStart(t *testing.T) {
	a := &config.Config{Common: config.Common{User: "nobody", UserLine: 3}}
	b := &config.Config{Common: config.Common{User: "root", UserLine: 7, Group: "root", GroupLine: 8}}
	if got := changedFields(a, b); len(got) != 0 {
		t.Errorf("changed fields %q, want none", got)
	}
}
