package netcfg

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseResolvRecord(t *testing.T) {
	d := parseResolvRecord("# resolv.conf from wg0\nnameserver 10.5.0.53\nnameserver fd00::53\nsearch corp.example lab.example\noptions edns0\nnameserver bogus\n")
	want := []netip.Addr{netip.MustParseAddr("10.5.0.53"), netip.MustParseAddr("fd00::53")}
	if !slices.Equal(d.Servers, want) || !slices.Equal(d.Search, []string{"corp.example", "lab.example"}) || d.Default {
		t.Errorf("parseResolvRecord = %+v", d)
	}
	if d := parseResolvRecord(""); len(d.Servers)+len(d.Search) != 0 {
		t.Errorf("empty record = %+v", d)
	}
}

func FuzzParseResolvRecord(f *testing.F) {
	f.Add("nameserver 10.5.0.53\nsearch a.example b.example\n")
	f.Add("nameserver\nsearch\n\x00nameserver ::1%eth0\n")
	f.Add("# resolv.conf from wg0\noptions rotate\n")
	f.Fuzz(func(t *testing.T, s string) {
		d := parseResolvRecord(s)
		for _, a := range d.Servers {
			if !a.IsValid() {
				t.Fatalf("invalid server from %q", s)
			}
		}
	})
}
