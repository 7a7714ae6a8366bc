package config

import (
	"strconv"
	"strings"
	"testing"
)

// The file's own dns lines are kept for the caller (with dhcp-option's),
// and a line that cannot be applied is an error at its line.
func TestDNSOptionInTheFile(t *testing.T) {
	base := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	cfg, err := Parse([]byte(base+"dns server 0 address 10.8.0.1 [fd00::53]\ndns search-domains corp.example\n"), "x.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.DHCPOptions, "|") != "dns server 0 address 10.8.0.1 [fd00::53]|dns search-domains corp.example" {
		t.Fatalf("%q", cfg.DHCPOptions)
	}
	at := strings.Count(base, "\n") + 1
	for _, bad := range []string{"dns server 0 address 10.8.0.1:5353", "dns server 0 resolve-domains x.example", "dns search-domains", "dns nonsense"} {
		_, err := Parse([]byte(base+bad+"\n"), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "x.ovpn:"+strconv.Itoa(at)+": dns: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
