package ovpntunnel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/ovpn/control"
)

// fakeResolver records resolver calls; missing makes SetDNS answer as
// netcfg does with neither systemd-resolved nor resolvconf, fail makes it
// fail otherwise.
type fakeResolver struct {
	calls   []string
	missing bool
	fail    error
}

func (f *fakeResolver) SetDNS(ifname string, d netcfg.DNS) (netcfg.Resolver, error) {
	if f.missing {
		return "", netcfg.ErrNoResolver
	}
	if f.fail != nil {
		return "", f.fail
	}
	all := ""
	if d.Default {
		all = " all"
	}
	f.calls = append(f.calls, fmt.Sprintf("set %s %s search=%s%s", ifname, joinAddrs(d.Servers), strings.Join(d.Search, ","), all))
	return netcfg.Resolvconf, nil
}

func (f *fakeResolver) UnsetDNS(ifname string) error {
	f.calls = append(f.calls, "unset "+ifname)
	return nil
}

func mustPush(t *testing.T, opts ...string) *control.PushReply {
	t.Helper()
	p, err := control.ParsePushOptions(append([]string{"ifconfig 10.8.0.2 255.255.255.0", "topology subnet"}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanDNS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    DNSMode
		opts    []string
		servers string // joined, "" for nothing applied
		search  []string
		note    string // a note that must be printed ("" for none at all)
	}{
		{"nothing pushed", DNSAuto, nil, "", nil, ""},
		{"one server", DNSAuto, []string{"dhcp-option DNS 10.8.0.1"}, "10.8.0.1", nil, ""},
		{"both families and domains", DNSAuto, []string{"dhcp-option DNS 10.8.0.1", "dhcp-option DNS6 fd00::53",
			"dhcp-option DOMAIN-SEARCH lab.example", "dhcp-option DOMAIN corp.example"},
			"10.8.0.1 fd00::53", []string{"corp.example", "lab.example"}, ""},
		{"off", DNSOff, []string{"dhcp-option DNS 10.8.0.1", "dhcp-option DOMAIN corp.example"}, "", nil,
			"pushed DNS (10.8.0.1, search corp.example) not applied: --dns=off"},
		{"search domains without a server", DNSAuto, []string{"dhcp-option DOMAIN corp.example"}, "", nil,
			"pushed search domains corp.example not applied: no DNS server pushed"},
		{"malformed server", DNSAuto, []string{"dhcp-option DNS 10.8.0.1", "dhcp-option DNS nonsense"}, "10.8.0.1", nil,
			`pushed option skipped: "dhcp-option DNS nonsense": not a server address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, notes := planDNS(tc.mode, mustPush(t, tc.opts...))
			if joinAddrs(s.servers) != tc.servers || !slices.Equal(s.search, tc.search) {
				t.Errorf("planned %q search %q, want %q search %q", joinAddrs(s.servers), s.search, tc.servers, tc.search)
			}
			if tc.note == "" && len(notes) > 0 || tc.note != "" && !slices.Contains(notes, tc.note) {
				t.Errorf("notes %q, want %q", notes, tc.note)
			}
		})
	}
}

// newTestApplier returns an applier on a fake resolver and what it printed.
func newTestApplier(mode DNSMode, res resolver) (*dnsApplier, *[]string) {
	var out []string
	pr := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	return &dnsApplier{ifname: "tun7", mode: mode, res: res, progress: pr, warn: pr}, &out
}

// The record follows the pushes of successive sessions: registered once,
// kept while the push repeats, replaced (resolvconf -a over the old one)
// when it changes, removed when a push carries no DNS any more and at
// teardown.
func TestDNSApplierFollowsPushes(t *testing.T) {
	res := &fakeResolver{}
	d, out := newTestApplier(DNSAuto, res)
	d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1", "dhcp-option DOMAIN corp.example"))
	d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1", "dhcp-option DOMAIN corp.example")) // reconnect, same push
	d.apply(mustPush(t, "dhcp-option DNS 10.9.0.1", "dhcp-option DOMAIN corp.example")) // another server
	d.apply(mustPush(t, "dhcp-option DNS 10.9.0.1", "dhcp-option DOMAIN-SEARCH lab.example"))
	d.apply(mustPush(t)) // no DNS any more
	d.apply(mustPush(t, "dhcp-option DNS6 fd00::53"))
	d.remove()
	d.remove() // a second teardown changes nothing
	want := []string{"set tun7 10.8.0.1 search=corp.example", "set tun7 10.9.0.1 search=corp.example",
		"set tun7 10.9.0.1 search=lab.example", "unset tun7", "set tun7 fd00::53 search=", "unset tun7"}
	if !slices.Equal(res.calls, want) {
		t.Errorf("resolvconf calls\n%q\nwant\n%q", res.calls, want)
	}
	if !slices.Contains(*out, "DNS for tun7: 10.8.0.1, search corp.example (resolvconf)") ||
		!slices.Contains(*out, "DNS settings of tun7 removed") {
		t.Errorf("progress output %q", *out)
	}
}

func TestDNSApplierOff(t *testing.T) {
	res := &fakeResolver{}
	d, out := newTestApplier(DNSOff, res)
	d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1"))
	d.apply(mustPush(t, "dhcp-option DNS 10.9.0.1"))
	d.remove()
	if len(res.calls) != 0 {
		t.Errorf("--dns=off called resolvconf: %q", res.calls)
	}
	if len(*out) != 2 || !strings.Contains((*out)[0], "not applied: --dns=off") {
		t.Errorf("output %q", *out)
	}
}

// With neither systemd-resolved nor resolvconf, apply fails (the tunnel
// comes down) with an error naming the servers and --dns=off; other
// failures of the resolver are errors too.
func TestDNSApplierWithoutResolverFails(t *testing.T) {
	res := &fakeResolver{missing: true}
	d, out := newTestApplier(DNSAuto, res)
	err := d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1", "dhcp-option DNS6 fd00::53"))
	if err == nil || !strings.Contains(err.Error(), "the DNS servers the server pushed (10.8.0.1 fd00::53) cannot be applied: neither systemd-resolved is running nor resolvconf is installed") ||
		!strings.Contains(err.Error(), "--dns=off") {
		t.Fatalf("error %v", err)
	}
	d.remove()
	if len(*out) != 0 || len(res.calls) != 0 {
		t.Fatalf("output %q, calls %q", *out, res.calls)
	}

	res = &fakeResolver{fail: fmt.Errorf("resolvconf -a tun7: exit status 1")}
	d, _ = newTestApplier(DNSAuto, res)
	if err := d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1")); err == nil || !strings.Contains(err.Error(), "DNS servers 10.8.0.1 not applied: resolvconf -a tun7: exit status 1") {
		t.Fatalf("error %v", err)
	}
	d.remove()
	if len(res.calls) != 0 {
		t.Fatalf("calls %q", res.calls)
	}

	// A redirected gateway sends every lookup to the pushed servers.
	res = &fakeResolver{}
	d, _ = newTestApplier(DNSAuto, res)
	if err := d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1", "redirect-gateway def1")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"set tun7 10.8.0.1 search= all"}; !slices.Equal(res.calls, want) {
		t.Fatalf("calls %q, want %q", res.calls, want)
	}

	// A failure after an earlier push was registered removes the old
	// servers rather than leave them in use.
	res = &fakeResolver{}
	d, _ = newTestApplier(DNSAuto, res)
	d.apply(mustPush(t, "dhcp-option DNS 10.8.0.1"))
	res.fail = fmt.Errorf("exit status 1")
	d.apply(mustPush(t, "dhcp-option DNS 10.9.0.1"))
	d.remove()
	if want := []string{"set tun7 10.8.0.1 search=", "unset tun7"}; !slices.Equal(res.calls, want) {
		t.Fatalf("calls %q, want %q", res.calls, want)
	}
}

func TestParseDNSMode(t *testing.T) {
	if m, err := ParseDNSMode("auto"); m != DNSAuto || err != nil {
		t.Error("auto", m, err)
	}
	if m, err := ParseDNSMode("off"); m != DNSOff || err != nil {
		t.Error("off", m, err)
	}
	if _, err := ParseDNSMode("on"); err == nil || !strings.Contains(err.Error(), `--dns "on": want auto or off`) {
		t.Error(err)
	}
}

// The .ovpn file's own dhcp-option lines come first, pushed ones after;
// a pushed DOMAIN replaces the file's (DOMAIN has one value, the last);
// --dns=off still applies none.
func TestLocalDHCPOptionsJoinThePush(t *testing.T) {
	local := []string{"dhcp-option DNS 192.0.2.53", "dhcp-option DOMAIN home.example"}
	push := mustPush(t, "dhcp-option DNS 10.8.0.1", "dhcp-option DOMAIN corp.example")
	s, _ := planDNS(DNSAuto, withLocalDNS(local, push))
	if joinAddrs(s.servers) != "192.0.2.53 10.8.0.1" || !slices.Equal(s.search, []string{"corp.example"}) {
		t.Errorf("servers %q search %q", joinAddrs(s.servers), s.search)
	}
	// Only the file's lines: they are applied on their own.
	s, _ = planDNS(DNSAuto, withLocalDNS(local, mustPush(t)))
	if joinAddrs(s.servers) != "192.0.2.53" || !slices.Equal(s.search, []string{"home.example"}) {
		t.Errorf("file only: servers %q search %q", joinAddrs(s.servers), s.search)
	}
	if s, _ := planDNS(DNSOff, withLocalDNS(local, push)); !s.empty() {
		t.Errorf("--dns=off applied %v", s)
	}
	if got := withLocalDNS(nil, push); got != push {
		t.Error("without local lines the push is not used as it is")
	}
}
