package main

import (
	"os"
	"strings"
	"testing"

	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestReloadChangesDNSThroughSystemdResolved brings a tunnel up with one
// name server and reloads it with another, through a real
// systemd-resolved: the link gets the new server, a second reload finds
// nothing to change, and a file without DNS removes the link's settings.
func TestReloadChangesDNSThroughSystemdResolved(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlrd")
	rd := tnetns.StartResolved(t, ns)
	env = append(env, rd.Env, "PATH="+t.TempDir()) // no resolvconf: resolved alone
	ifname := tnetns.Unique("wlrd")
	priv, _ := genKey(t)
	_, pub := genKey(t)
	conf := func(dns string) string {
		return "[Interface]\nPrivateKey = " + priv + "\nAddress = 10.5.0.1/24\n" + dns + "\n[Peer]\nPublicKey = " + pub + "\nAllowedIPs = 10.5.0.0/24\nEndpoint = 127.0.0.1:51820\n"
	}
	file := writeConf(t, ifname, conf("DNS = 10.5.0.53, corp.example"))
	if out, err := tnetns.Try(ns, env, self(t), "up", file); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Cleanup(func() { tnetns.Try(ns, env, self(t), "down", file) })
	reload := func(body, want string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := tnetns.Try(ns, env, self(t), "reload", file)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("reload: %v, want %q in:\n%s", err, want, out)
		}
	}
	reload(conf("DNS = 10.5.0.54, corp.example"), "DNS 10.5.0.53, corp.example -> 10.5.0.54, corp.example")
	if got := rd.Resolvectl(t, "dns", ifname); !strings.Contains(got, "10.5.0.54") || strings.Contains(got, "10.5.0.53") {
		t.Errorf("resolvectl dns %s after reload: %s", ifname, got)
	}
	reload(conf("DNS = 10.5.0.54, corp.example"), "no change")
	reload(conf(""), "DNS 10.5.0.54, corp.example -> (none)")
	if got := rd.Resolvectl(t, "dns", ifname); strings.Contains(got, "10.5.0.54") {
		t.Errorf("resolvectl dns %s after a reload without DNS: %s", ifname, got)
	}
}
