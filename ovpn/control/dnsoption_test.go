package control

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// OpenVPN 2.6's dns option: servers by priority replace dhcp-option DNS,
// search-domains replace DOMAIN and DOMAIN-SEARCH, what cannot be applied
// is noted.
func TestPushReplyDNSOption(t *testing.T) {
	r, err := ParsePushOptions([]string{
		"dhcp-option DNS 10.0.0.53", "dhcp-option DOMAIN old.example",
		"dns server 5 address 10.8.0.2 [fd00::53]:53",
		"dns server -1 address 10.8.0.1:53 10.8.0.1",
		"dns server 1 resolve-domains corp.example",
		"dns server 1 dnssec yes",
		"dns server 2 address 10.8.0.9:5353",
		"dns search-domains corp.example lab.example. corp.example",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("10.8.0.2"), netip.MustParseAddr("fd00::53")}
	if !slices.Equal(r.DNS, want) {
		t.Fatalf("servers %v, want %v", r.DNS, want)
	}
	if got := r.SearchList(); !slices.Equal(got, []string{"corp.example", "lab.example"}) {
		t.Fatalf("search %v", got)
	}
	notes := strings.Join(r.Ignored, "\n")
	for _, w := range []string{"resolve-domains", "dnssec is not applied", `"10.8.0.9:5353" is not a server address on port 53`} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	// Without dns servers the dhcp-option ones stay.
	r, _ = ParsePushOptions([]string{"dhcp-option DNS 10.0.0.53", "dns search-domains a.example"})
	if len(r.DNS) != 1 || r.DNS[0] != netip.MustParseAddr("10.0.0.53") || !slices.Equal(r.SearchList(), []string{"a.example"}) {
		t.Fatalf("%v %v", r.DNS, r.SearchList())
	}
	for _, bad := range []string{"dns", "dns server x address 1.2.3.4", "dns server 0 address", "dns bogus", "dns server 0 address nonsense", "dns search-domains -bad-"} {
		r, err := ParsePushOptions([]string{bad})
		if err != nil || len(r.Ignored) == 0 {
			t.Errorf("%q: %v, ignored %v", bad, err, r.Ignored)
		}
	}
}
