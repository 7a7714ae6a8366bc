package config

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// A client-config-dir file with every directive Wirelane implements.
func TestParseClientConfig(t *testing.T) {
	text := `# alice's gateway
ifconfig-push 10.8.0.50 255.255.255.0
ifconfig-ipv6-push fd42::50/64 fd42::1
iroute 192.168.50.0 255.255.255.0
iroute 192.168.51.7
--iroute-ipv6 fd99:50::/64
push "route 10.200.0.0 255.255.0.0"
push-remove "dhcp-option"
push-reset
echo "hello"
pussh "route 1.2.3.0 255.255.255.0"
disable
`
	c, err := ParseClientConfig([]byte(text), "alice", "ccd/alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &ClientConfig{Name: "alice", File: "ccd/alice",
		Address: netip.MustParseAddr("10.8.0.50"), Netmask: 24, AddressLine: 2,
		Address6: netip.MustParsePrefix("fd42::50/64"), Address6Line: 3,
		IRoutes: []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("192.168.51.7/32"), netip.MustParsePrefix("fd99:50::/64")},
		Push:    []string{"route 10.200.0.0 255.255.0.0"}, PushRemove: []string{"dhcp-option"}, PushReset: true, Disable: true,
		Warnings: []Diagnostic{{Line: 10, Directive: "echo", Message: "ignored"},
			{Line: 11, Directive: "pussh", Message: "unknown directive ignored; did you mean push?"}}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if !c.Equal(want) || c.Equal(&ClientConfig{}) || c.SamePush(nil) || !(*ClientConfig)(nil).SamePush(&ClientConfig{}) {
		t.Error("Equal/SamePush")
	}
}

// The options a client gets: the server's list as push-reset and
// push-remove leave it, then its own.
func TestClientConfigPushOptions(t *testing.T) {
	global := []string{"route 10.1.0.0 255.255.0.0", "dhcp-option DNS 10.8.0.1", "route-ipv6 fd99::/64"}
	for _, tc := range []struct {
		c    *ClientConfig
		want []string
	}{
		{nil, global},
		{&ClientConfig{Push: []string{"route 10.2.0.0 255.255.0.0"}}, append(append([]string(nil), global...), "route 10.2.0.0 255.255.0.0")},
		{&ClientConfig{PushReset: true, Push: []string{"ping 5"}}, []string{"ping 5"}},
		{&ClientConfig{PushRemove: []string{"route"}}, []string{"dhcp-option DNS 10.8.0.1"}},
		{&ClientConfig{PushRemove: []string{"route-ipv6 fd99:"}}, global[:2]},
	} {
		if got := tc.c.PushOptions(global); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %q, want %q", tc.c, got, tc.want)
		}
	}
}

// Bad lines are errors at FILE:LINE; directives of the server's own file
// and known but unimplemented ones are refused.
func TestParseClientConfigErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"ifconfig-push 10.8.0.5\n", "ccd/bob:1: ifconfig-push: takes 2 to 3 arguments, got 1"},
		{"\nifconfig-push 10.8.0.5 255.0.255.0\n", "ccd/bob:2: ifconfig-push: non-contiguous netmask"},
		{"ifconfig-push fd00::5 255.255.255.0\n", "ccd/bob:1: ifconfig-push: want an IPv4 address"},
		{"ifconfig-push 10.8.0.5 255.255.255.0 10.9.0.5\n", "alias address (NAT) is not supported"},
		{"ifconfig-ipv6-push 10.8.0.5/24\n", "ccd/bob:1: ifconfig-ipv6-push: want an IPv6 address"},
		{"ifconfig-ipv6-push fd42::5/64 nonsense\n", "want the server's IPv6 address"},
		{"iroute 192.168.1.1 255.255.255.0\n", "ccd/bob:1: iroute: 192.168.1.1/24 has host bits set"},
		{"iroute 192.168.1.0 255.255.255.0 x\n", "iroute: takes 1 to 2 arguments"},
		{"iroute-ipv6 192.168.1.0/24\n", "iroute-ipv6: want an IPv6 prefix"},
		{"push \"ifconfig 10.8.0.9 255.255.255.0\"\n", "is pushed by the server itself"},
		{"push \"comp-lzo no\"\n", "compression not supported"},
		{"push \"a,b\"\n", "holds a comma"},
		{"push-reset now\n", "push-reset: takes 0 argument(s)"},
		{"disable yes\n", "disable: takes 0 argument(s)"},
		{"push-remove \"\"\n", "push-remove: empty text"},
		{"vlan-pvid 5\n", "ccd/bob:1: vlan-pvid: VLAN tagging (tap devices): not supported"},
		{"config other.conf\n", "including other files: not supported"},
		{"ca ca.crt\n", "ccd/bob:1: ca: it belongs in the server's configuration file"},
		{"client-to-client\n", "client-to-client: it belongs in the server's"},
		{"remote vpn.example 1194\n", "remote: it belongs in the server's"},
		{"route 10.1.0.0 255.255.0.0\n", "route: it belongs in the server's"},
		{"<ca>\nx\n</ca>\n", "inline blocks are not allowed"},
		{"push \"unterminated\n", "ccd/bob:1: unterminated quote"},
	} {
		_, err := ParseClientConfig([]byte(tc.text), "bob", "ccd/bob", []string{"route"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.text, err, tc.want)
		}
	}
	_, err := ParseClientConfig([]byte("ca x\n"), "bob", "ccd/bob", nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 1 || !errors.Is(err, ErrMainOnly) {
		t.Errorf("want an *Error at line 1 wrapping ErrMainOnly, got %#v", err)
	}
	if _, err := ParseClientConfig([]byte("vlan-pvid 3\n"), "bob", "ccd/bob", nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("vlan-pvid: %v", err)
	}
}

// No input panics or hangs the client-config-dir parser; what it accepts
// is well formed.
func FuzzParseClientConfig(f *testing.F) {
	for _, s := range []string{
		"ifconfig-push 10.8.0.50 255.255.255.0\niroute 192.168.50.0 255.255.255.0\n",
		"ifconfig-ipv6-push fd42::50/64 fd42::1\niroute-ipv6 fd99::/64\n",
		"push \"route 10.1.0.0 255.255.0.0\"\npush-reset\npush-remove dhcp\ndisable\n",
		"# comment\n; other\n--iroute 10.0.0.0 255.0.0.0\r\n", "ca x\n", "<ca>\n", "push 'a\n", "vlan-pvid 1\nechoo\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseClientConfig(b, "x", "ccd/x", []string{"route"})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ccd/x:") {
				t.Fatalf("error without its location: %v", err)
			}
			return
		}
		for _, r := range c.IRoutes {
			if r.Masked() != r {
				t.Fatalf("iroute with host bits: %v", r)
			}
		}
		if c.Address.IsValid() && (!c.Address.Is4() || c.Netmask < 0 || c.Netmask > 32) {
			t.Fatalf("bad fixed address %v/%d", c.Address, c.Netmask)
		}
		_ = c.PushOptions([]string{"route 10.0.0.0 255.0.0.0"})
	})
}
