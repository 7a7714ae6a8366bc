package gateway

import (
	"strings"
	"testing"
	"time"
)

// fleetFile is a gateway in a fleet without static sites.
const fleetFile = `[interface]
private_key = "` + testPriv + `"
listen_port = 51820
addresses = ["10.90.0.1/32"]

[fleet]
endpoints = ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
ca_file = "ca.pem"
cert_file = "/etc/wirelane/fleet/gw.pem"
key_file = "gw-key.pem"
prefix = "/wirelane/fleets/prod"
site = "berlin"
public_endpoints = ["198.51.100.7:51820"]
networks = ["10.20.0.0/16", "10.90.0.1/32"]
location = "eu"
lease_ttl = 10
`

func TestFleetTable(t *testing.T) {
	g, err := Parse("/etc/wirelane/gw.toml", []byte(fleetFile))
	if err != nil {
		t.Fatal(err)
	}
	f := g.Fleet
	if f == nil || len(g.Sites) != 0 {
		t.Fatalf("fleet %+v, sites %d", f, len(g.Sites))
	}
	if f.Site != "berlin" || f.Prefix != "/wirelane/fleets/prod" || len(f.Endpoints) != 2 || f.Location != "eu" || f.LeaseTTL != 10*time.Second {
		t.Errorf("fleet %+v", f)
	}
	if f.CAFile != "/etc/wirelane/ca.pem" || f.KeyFile != "/etc/wirelane/gw-key.pem" || f.CertFile != "/etc/wirelane/fleet/gw.pem" {
		t.Errorf("TLS files not resolved against the file's directory: %q %q %q", f.CAFile, f.CertFile, f.KeyFile)
	}
	if len(f.Networks) != 2 || f.Networks[0].String() != "10.20.0.0/16" {
		t.Errorf("networks %v", f.Networks)
	}
	if s := g.Summary(); !strings.Contains(s, "fleet site:     berlin") || !strings.Contains(s, "/wirelane/fleets/prod on https://10.0.0.1:2379") {
		t.Errorf("summary:\n%s", s)
	}
	// The site name defaults to the interface name.
	g, err = Parse("/etc/wirelane/gw.toml", []byte(strings.Replace(fleetFile, "site = \"berlin\"\n", "", 1)))
	if err != nil || g.Fleet.Site != "gw" || g.Fleet.LeaseTTL != 10*time.Second {
		t.Fatalf("default site name: %v %+v", err, g)
	}
}

func TestFleetTableProblemsAtTheirPlace(t *testing.T) {
	line := func(old, new string) string { return strings.Replace(fleetFile, old, new, 1) }
	for _, tc := range []struct{ name, src, want string }{
		{"plain http", line(`"https://10.0.0.2:2379"`, `"http://10.0.0.2:2379"`),
			`gw.toml:7:39: endpoints: "http://10.0.0.2:2379" is not an etcd client URL like https://10.0.0.1:2379 (https is required: the fleet's records decide who joins the mesh)`},
		{"no TLS key", line("key_file = \"gw-key.pem\"\n", ""), "gw.toml:6:1: [fleet] needs key_file (etcd client TLS is required)"},
		{"a bad prefix", line(`prefix = "/wirelane/fleets/prod"`, `prefix = "wirelane/"`),
			`gw.toml:11:1: prefix "wirelane/": want a key prefix like /wirelane/fleets/NAME (words of A-Z a-z 0-9 _ . - after each /, no / at the end)`},
		{"networks with host bits", line(`"10.20.0.0/16", `, `"10.20.1.0/16", `), "gw.toml:14:13: network 10.20.1.0/16 has host bits set; write 10.20.0.0/16 (or 10.20.1.0/32 for the single address)"},
		{"overlapping networks", line(`"10.20.0.0/16", "10.90.0.1/32"]`, `"10.20.0.0/16", "10.20.3.0/24"]`), "gw.toml:14:29: network 10.20.3.0/24 overlaps 10.20.0.0/16 (line 14)"},
		{"a lease too short", line("lease_ttl = 10", "lease_ttl = 1"), "gw.toml:16:1: lease_ttl = 1 is out of range (seconds from 2 to 3600)"},
		{"a misspelt key", line("location = ", "locaton = "), `gw.toml:15:1: unknown key "locaton" in [fleet]; did you mean location?`},
		{"a bad public endpoint", line(`"198.51.100.7:51820"`, `"198.51.100.7"`), `gw.toml:13:21: public_endpoints: "198.51.100.7" has no port (want host:port)`},
		{"a public endpoint by name", line(`"198.51.100.7:51820"`, `"gw.example:51820"`), `gw.toml:13:21: public_endpoints: "gw.example:51820": give an IP address and port (the fleet's records hold addresses, not names)`},
		{"a static site overlapping the fleet's networks", fleetFile + "[[site]]\nname = \"a\"\npublic_key = \"" + keyB + "\"\nnetworks = [\"10.20.5.0/24\"]\n",
			`gw.toml:14:13: network 10.20.0.0/16 overlaps 10.20.5.0/24 of site "a" (line 20); a packet must have exactly one site to go to`},
		{"no networks", line("networks = [\"10.20.0.0/16\", \"10.90.0.1/32\"]\n", ""), "gw.toml:6:1: [fleet] needs networks (this site's networks, announced to the fleet)"},
		{"fleet not a table", "fleet = 3\n[interface]\nprivate_key = \"" + testPriv + "\"\n", "gw.toml:1:1: fleet must be a table ([fleet]), not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.toml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%s\nwant:\n%s", err, tc.want)
			}
		})
	}
}
