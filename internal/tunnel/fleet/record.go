package fleet

// A site record is what one gateway publishes about its site, as JSON
// under PREFIX/sites/NAME:
//
//	{"v":1,"name":"berlin","public_key":"<base64>","endpoints":["198.51.100.7:51820"],
//	 "networks":["10.20.0.0/16","10.90.0.2/32"],"location":"eu"}
//
// "v" is the record format's version. A gateway refuses a record of a
// version it does not know; fields it does not know in a version it knows
// are ignored, so a later minor addition keeps "v":1. Private and preshared
// keys are never in a record.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// RecordVersion is the version of the record format this code writes and
// reads.
const RecordVersion = 1

// Limits of a record.
const (
	MaxRecordSize = 16 << 10
	MaxNetworks   = 256
	MaxEndpoints  = 8
)

// Record is one site as the fleet knows it.
type Record struct {
	Name      string
	PublicKey wgquick.Key
	// Endpoints are where the site's gateway is reached, in order of
	// preference; the first is used. Empty: the site calls out.
	Endpoints []string
	// Networks are the site's networks: masked, no two overlapping.
	Networks []netip.Prefix
	// Location groups sites; "" means none (the site meshes with all).
	Location string
}

// recordJSON is the wire form.
type recordJSON struct {
	V         *int     `json:"v"`
	Name      string   `json:"name"`
	PublicKey string   `json:"public_key"`
	Endpoints []string `json:"endpoints,omitempty"`
	Networks  []string `json:"networks"`
	Location  string   `json:"location,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Encode returns the record's JSON.
func (r *Record) Encode() []byte {
	v := RecordVersion
	j := recordJSON{V: &v, Name: r.Name, PublicKey: r.PublicKey.String(), Endpoints: r.Endpoints, Location: r.Location}
	for _, n := range r.Networks {
		j.Networks = append(j.Networks, n.String())
	}
	b, _ := json.Marshal(j) // strings and slices of strings: cannot fail
	return b
}

// RecordError is a record that cannot be used, with the key it was found
// at: "KEY: what is wrong".
type RecordError struct {
	Key string
	Msg string
}

func (e *RecordError) Error() string { return e.Key + ": " + e.Msg }

// DecodeRecord reads the record stored at key. Every problem is an error
// naming key; the values are checked as a gateway file's are.
func DecodeRecord(key string, b []byte) (*Record, error) {
	bad := func(format string, args ...any) error {
		return &RecordError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if len(b) > MaxRecordSize {
		return nil, bad("record of %d bytes is larger than %d", len(b), MaxRecordSize)
	}
	var j recordJSON
	// json.Unmarshal, a quarter of a json.Decoder's cost (a gateway
	// decodes every record at every change); the Decoder only to say
	// what is wrong with a record that does not decode.
	if err := json.Unmarshal(b, &j); err != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		if derr := dec.Decode(&recordJSON{}); derr != nil {
			err = derr
		} else if dec.More() {
			return nil, bad("not a site record: text after the JSON object")
		}
		return nil, bad("not a site record (JSON): %v", clipErr(err))
	}
	switch {
	case j.V == nil:
		return nil, bad("no \"v\" (the record format's version)")
	case *j.V != RecordVersion:
		return nil, bad("record version %d; this gateway reads version %d", *j.V, RecordVersion)
	}
	r := &Record{Name: j.Name, Location: j.Location}
	if !nameRE.MatchString(j.Name) {
		return nil, bad("name %q: use 1 to 63 of a-z A-Z 0-9 _ . - (starting with a letter or digit)", clip(j.Name))
	}
	if j.Location != "" && !nameRE.MatchString(j.Location) {
		return nil, bad("location %q: use 1 to 63 of a-z A-Z 0-9 _ . - (starting with a letter or digit)", clip(j.Location))
	}
	k, err := wgquick.ParseKey(j.PublicKey)
	if err != nil || k.IsZero() {
		return nil, bad("public_key %q is not a valid key (want 44 characters of base64)", clip(j.PublicKey))
	}
	r.PublicKey = k
	if len(j.Endpoints) > MaxEndpoints {
		return nil, bad("%d endpoints; at most %d", len(j.Endpoints), MaxEndpoints)
	}
	for _, ep := range j.Endpoints {
		// An address, never a name: a name would be resolved at every
		// reload, and one that does not resolve would stop them all.
		ap, err := netip.ParseAddrPort(ep)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" || ap.String() != ep {
			return nil, bad("endpoint %q is not IP:port (or [IPv6]:port)", clip(ep))
		}
		r.Endpoints = append(r.Endpoints, ep)
	}
	if len(j.Networks) == 0 {
		return nil, bad("no networks")
	}
	if len(j.Networks) > MaxNetworks {
		return nil, bad("%d networks; at most %d", len(j.Networks), MaxNetworks)
	}
	for _, s := range j.Networks {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" {
			return nil, bad("network %q is not a CIDR prefix", clip(s))
		}
		if p != p.Masked() {
			return nil, bad("network %s has host bits set", p)
		}
		if p.Bits() == 0 {
			return nil, bad("network %s is a default route: a fleet site may not claim all traffic", p)
		}
		for _, o := range r.Networks {
			if o.Overlaps(p) {
				return nil, bad("network %s overlaps %s of the same record", p, o)
			}
		}
		r.Networks = append(r.Networks, p)
	}
	return r, nil
}

func clip(s string) string {
	if len(s) > 48 {
		return s[:48] + "..."
	}
	return s
}

func clipErr(err error) string { return clip(strings.TrimPrefix(err.Error(), "json: ")) }
