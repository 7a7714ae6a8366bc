package ovpntunnel

// `wirelane ovpn connect` registers the DNS servers a real OpenVPN 2.6
// server pushes with resolvconf, and removes them again:
//
//	odc (client side)                            ods (server side)
//	  wlc0 10.8.0.2  <- wirelane connect           ovs0 10.8.0.1  <- openvpn, pushes
//	  c1 192.168.87.2  ==========veth==========    s1 192.168.87.1   dhcp-option DNS 10.8.0.1
//
// resolvconf is not per network namespace, so the test never runs the
// host's: the client's PATH holds a fake resolvconf that appends its
// arguments and input to a file (as cmd/wirelane's root tests do), or no
// resolvconf at all.
//
// With the fake: the record is registered when the tunnel comes up, kept
// through a reconnect with the same push, replaced when the restarted
// server pushes another server, and removed at Ctrl-C; --dns=off makes no
// call. Without resolvconf (and no systemd-resolved on the bus): connect
// fails closed, saying why and naming --dns=off, and leaves no device.
// The D-Bus system bus is pointed at nothing, so that a resolved on the
// host is never used.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EConnectAppliesPushedDNS(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane DNS CA", client: "cli1", srvNS: "ods", cliNS: "odc",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"openvpn", "ping"}})
	serverConf := func(dns string) string {
		return "port 1194\nproto udp4\nlocal 192.168.87.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.8.0.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"push \"dhcp-option DNS " + dns + "\"\npush \"dhcp-option DOMAIN corp.example\"\n" +
			"push \"dhcp-option DOMAIN-SEARCH lab.example\"\npush \"redirect-gateway def1\"\nkeepalive 1 3\nverb 3\n"
	}
	tb.write(t, map[string]string{
		"server.conf": serverConf("10.8.0.1"),
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
	})
	// The fake resolvconf, alone in its directory.
	bin, empty := filepath.Join(tb.dir, "bin"), filepath.Join(tb.dir, "empty")
	record := filepath.Join(tb.dir, "resolvconf-calls")
	for _, d := range []string{bin, empty} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := "#!/bin/sh\necho \"$*\" >> " + record + "\ncat >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "resolvconf"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	// calls returns what the fake recorded, with a record name prefix
	// from an /etc/resolvconf/interface-order (if the host has one)
	// taken out.
	calls := func() string {
		b, _ := os.ReadFile(record)
		return regexp.MustCompile(` \S+\.wlc0 `).ReplaceAllString(string(b), " wlc0 ")
	}
	noBus := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(tb.dir, "no-bus")
	withFake := []string{"PATH=" + bin + ":/usr/sbin:/usr/bin:/sbin:/bin", noBus}
	ovs := tb.startOpenVPN(t, tb.srvNS, "server.conf")

	// With resolvconf.
	{
		cli := startHelperEnv(t, tb.cliNS, withFake, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
		cli.waitFor(t, "tunnel up", 15*time.Second)
		add1 := "-a wlc0 -m 0 -x\nnameserver 10.8.0.1\nsearch corp.example lab.example\n"
		if got := calls(); got != add1 {
			t.Fatalf("resolvconf calls:\n%s\nwant:\n%s", got, add1)
		}
		if !strings.Contains(cli.out.String(), "ovpn: DNS for wlc0: 10.8.0.1, search corp.example lab.example (resolvconf)") {
			t.Fatalf("progress output lacks the DNS line:\n%s", cli.out.String())
		}
		// The pushed name server is reached through the tunnel.
		if r := netns.Run(t, tb.cliNS, "ip", "route", "get", "10.8.0.1"); !strings.Contains(r, "dev wlc0") {
			t.Fatalf("10.8.0.1 not routed into the tunnel: %s", r)
		}
		netns.Run(t, tb.cliNS, "ping", "-c", "1", "-W", "2", "10.8.0.1")

		// The server comes back pushing another name server: the record
		// is replaced.
		ovs.cmd.Process.Kill()
		<-ovs.done
		tb.write(t, map[string]string{"server.conf": serverConf("10.8.0.53")})
		ovs = tb.startOpenVPN(t, tb.srvNS, "server.conf")
		cli.waitFor(t, "tunnel up again", 30*time.Second)
		add2 := "-a wlc0 -m 0 -x\nnameserver 10.8.0.53\nsearch corp.example lab.example\n"
		if got := calls(); got != add1+add2 {
			t.Fatalf("resolvconf calls after the reconnect:\n%s\nwant:\n%s", got, add1+add2)
		}
		cli.interrupt(t)
		if got, want := calls(), add1+add2+"-d wlc0 -f\n"; got != want {
			t.Fatalf("resolvconf calls after Ctrl-C:\n%s\nwant:\n%s", got, want)
		}
		if !strings.Contains(cli.out.String(), "ovpn: DNS settings of wlc0 removed") {
			t.Fatalf("no removal in the output:\n%s", cli.out.String())
		}
		t.Logf("connect output:\n%s", cli.out.String())
	}

	// --dns=off.
	{
		before := calls()
		cli := startHelperEnv(t, tb.cliNS, withFake, "connect", "--dev", "wlc0", "--dns=off", tb.path("cli1.ovpn"))
		cli.waitFor(t, "tunnel up", 15*time.Second)
		cli.interrupt(t)
		if got := calls(); got != before {
			t.Fatalf("--dns=off called resolvconf:\n%s", strings.TrimPrefix(got, before))
		}
		if !strings.Contains(cli.out.String(), "pushed DNS (10.8.0.53, search corp.example lab.example) not applied: --dns=off") {
			t.Fatalf("output:\n%s", cli.out.String())
		}
	}

	// Neither resolvconf nor systemd-resolved: connect fails closed.
	{
		before := calls()
		cli := startHelperEnv(t, tb.cliNS, []string{"PATH=" + empty, noBus}, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
		select {
		case <-cli.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("still running without a resolver:\n%s", cli.out.String())
		}
		if cli.err == nil {
			t.Fatalf("connect succeeded without a resolver:\n%s", cli.out.String())
		}
		want := "the DNS servers the server pushed (10.8.0.53, search corp.example lab.example) cannot be applied: neither systemd-resolved is running nor resolvconf is installed"
		if !strings.Contains(cli.out.String(), want) || !strings.Contains(cli.out.String(), "--dns=off") {
			t.Fatalf("no error %q:\n%s", want, cli.out.String())
		}
		if strings.Contains(cli.out.String(), "tunnel up") {
			t.Fatalf("the tunnel came up:\n%s", cli.out.String())
		}
		if out := netns.Run(t, tb.cliNS, "ip", "link", "show"); strings.Contains(out, "wlc0") {
			t.Fatalf("wlc0 left behind:\n%s", out)
		}
		if got := calls(); got != before {
			t.Fatalf("resolvconf called:\n%s", got)
		}
	}
}

// TestE2EConnectGivesPushedDNSToSystemdResolved runs a real
// systemd-resolved on a private bus in the client's namespace
// (netns.StartResolved) and no resolvconf: the pushed server and domains
// go to the TUN link, with "~." since the server redirects the gateway,
// and are gone after Ctrl-C.
func TestE2EConnectGivesPushedDNSToSystemdResolved(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane resolved CA", client: "cli1", srvNS: "ors", cliNS: "orc",
		srvIf: "s1", cliIf: "c1", net: "192.168.94", need: []string{"openvpn"}})
	rd := netns.StartResolved(t, tb.cliNS)
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.94.1\ndev ovs1\ndev-type tun\ntopology subnet\n" +
			"server 10.8.1.0 255.255.255.0\n" + serverCreds + "data-ciphers AES-256-GCM\ndisable-dco\n" +
			"push \"dhcp-option DNS 10.8.1.1\"\npush \"dhcp-option DOMAIN corp.example\"\n" +
			"push \"redirect-gateway def1\"\nkeepalive 1 3\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.94.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
	})
	tb.startOpenVPN(t, tb.srvNS, "server.conf")
	empty := filepath.Join(tb.dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cli := startHelperEnv(t, tb.cliNS, []string{"PATH=" + empty, rd.Env}, "connect", "--dev", "wlc1", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	if !strings.Contains(cli.out.String(), "ovpn: DNS for wlc1: 10.8.1.1, search corp.example (systemd-resolved)") {
		t.Fatalf("progress output lacks the DNS line:\n%s", cli.out.String())
	}
	if got := rd.Resolvectl(t, "dns", "wlc1"); !strings.Contains(got, "10.8.1.1") {
		t.Errorf("resolvectl dns wlc1: %s", got)
	}
	if got := rd.Resolvectl(t, "domain", "wlc1"); !strings.Contains(got, "corp.example ~.") {
		t.Errorf("resolvectl domain wlc1: %s", got)
	}
	cli.interrupt(t)
	if got := rd.Resolvectl(t, "dns"); strings.Contains(got, "10.8.1.1") {
		t.Errorf("resolved keeps the pushed server after Ctrl-C:\n%s", got)
	}
}
