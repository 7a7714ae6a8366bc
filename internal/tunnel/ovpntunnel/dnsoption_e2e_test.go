package ovpntunnel

// OpenVPN 2.6's `dns` option pushed by a real OpenVPN 2.6 server and in
// the client file, applied through resolvconf like dhcp-option DNS (the
// fake resolvconf of dns_e2e_test.go: the host's is never run):
//
//	onc (client side)                            ons (server side)
//	  wlc0 10.17.0.2  <- wirelane connect          ovs0 10.17.0.1  <- openvpn, pushes
//	  c1 192.168.90.2  ==========veth==========    s1 192.168.90.1   dns server 0 address ...
//
// The pushed `dns server` addresses replace the pushed dhcp-option DNS,
// the file's own `dns server 5` line comes after them by priority, and
// `dns search-domains` is the search list; the record goes at Ctrl-C.

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectAppliesPushedDNSOption(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane DNS2 CA", client: "cli1", srvNS: "ons", cliNS: "onc",
		srvIf: "s1", cliIf: "c1", net: "192.168.90", need: []string{"openvpn", "ping"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.90.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.17.0.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"push \"dhcp-option DNS 10.0.0.99\"\npush \"dns server 0 address 10.17.0.1\"\n" +
			"push \"dns search-domains corp.example lab.example\"\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.90.1 1194 udp\nnobind\nremote-cert-tls server\n" +
			"dns server 5 address 10.17.0.53\n" + tb.clientInline(),
	})
	bin := filepath.Join(tb.dir, "bin")
	record := filepath.Join(tb.dir, "resolvconf-calls")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\necho \"$*\" >> " + record + "\ncat >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "resolvconf"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	calls := func() string {
		b, _ := os.ReadFile(record)
		return regexp.MustCompile(` \S+\.wlc0 `).ReplaceAllString(string(b), " wlc0 ")
	}
	env := []string{"PATH=" + bin + ":/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(tb.dir, "no-bus")}
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	cli := startHelperEnv(t, tb.cliNS, env, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	add := "-a wlc0 -m 0 -x\nnameserver 10.17.0.1\nnameserver 10.17.0.53\nsearch corp.example lab.example\n"
	if got := calls(); got != add {
		t.Fatalf("resolvconf calls:\n%s\nwant:\n%s", got, add)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.17.0.1")
	cli.interrupt(t)
	if got, want := calls(), add+"-d wlc0 -f\n"; got != want {
		t.Fatalf("resolvconf calls after Ctrl-C:\n%s\nwant:\n%s", got, want)
	}
}
