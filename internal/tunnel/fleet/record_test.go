package fleet

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const testKeyA = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="

func TestRecordRoundTrip(t *testing.T) {
	k, _ := wgquick.ParseKey(testKeyA)
	r := &Record{Name: "berlin", PublicKey: k, Endpoints: []string{"198.51.100.7:51820", "[2001:db8::7]:51820"},
		Networks: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:20::/48")}, Location: "eu"}
	back, err := DecodeRecord("/f/sites/berlin", r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("got %+v, want %+v", back, r)
	}
}

func TestBadRecordsAreRefusedWithTheirKey(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"not JSON", `hello`, "not a site record (JSON)"},
		{"no version", `{"name":"a","public_key":"` + testKeyA + `","networks":["10.0.0.0/8"]}`, `no "v"`},
		{"a newer version", `{"v":2,"name":"a"}`, "record version 2; this gateway reads version 1"},
		{"a bad key", `{"v":1,"name":"a","public_key":"AAAA","networks":["10.0.0.0/8"]}`, `public_key "AAAA" is not a valid key`},
		{"the zero key", `{"v":1,"name":"a","public_key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","networks":["10.0.0.0/8"]}`, "is not a valid key"},
		{"a bad name", `{"v":1,"name":"a b","public_key":"` + testKeyA + `","networks":["10.0.0.0/8"]}`, `name "a b"`},
		{"no networks", `{"v":1,"name":"a","public_key":"` + testKeyA + `"}`, "no networks"},
		{"host bits", `{"v":1,"name":"a","public_key":"` + testKeyA + `","networks":["10.1.0.0/8"]}`, "host bits set"},
		{"self overlap", `{"v":1,"name":"a","public_key":"` + testKeyA + `","networks":["10.0.0.0/8","10.1.0.0/16"]}`, "overlaps 10.0.0.0/8 of the same record"},
		{"a bad endpoint", `{"v":1,"name":"a","public_key":"` + testKeyA + `","endpoints":["nowhere"],"networks":["10.0.0.0/8"]}`, "endpoint"},
		{"a host name endpoint", `{"v":1,"name":"a","public_key":"` + testKeyA + `","endpoints":["gw.example:51820"],"networks":["10.0.0.0/8"]}`, `endpoint "gw.example:51820" is not IP:port`},
		{"trailing text", `{"v":1} {}`, "text after the JSON object"},
		{"a wrong type", `{"v":"1"}`, "not a site record (JSON)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord("/f/sites/a", []byte(tc.json))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "/f/sites/a: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want /f/sites/a: ...%s...", err, tc.want)
			}
		})
	}
}

// FuzzDecodeRecord: any bytes either decode to a record that encodes and
// decodes back to itself, or give an error that names the key.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"v":1,"name":"berlin","public_key":"` + testKeyA + `","endpoints":["198.51.100.7:51820"],"networks":["10.20.0.0/16"],"location":"eu"}`))
	f.Add([]byte(`{"v":1,"name":"x","public_key":"` + testKeyA + `","networks":["::/0"],"extra":{"a":[1,2]}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte(`{"v":1,"networks":["10.0.0.0/33"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord("/k", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "/k: ") {
				t.Fatalf("error without the key: %q", err)
			}
			return
		}
		back, err := DecodeRecord("/k", r.Encode())
		if err != nil {
			t.Fatalf("the encoding of an accepted record does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip changed %+v into %+v", r, back)
		}
	})
}
