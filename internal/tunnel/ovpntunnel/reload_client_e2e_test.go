package ovpntunnel

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestE2EReloadClient reloads a running `wirelane ovpn connect` through
// its control socket: its own DNS line applies at once (the fake
// resolvconf of dns_e2e_test.go gets the new record), a changed
// connect-retry waits for the next reconnect (the plan says so) and the
// session is kept (the server sees the same key and start); a broken file
// is refused with its line and changes nothing.
func TestE2EReloadClient(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Client Reload CA", client: "cli1", srvNS: "orcs", cliNS: "orcc",
		srvIf: "s1", cliIf: "c1", net: "192.168.85", need: []string{"ping"}})
	cliConf := "client\ndev tun\nremote 192.168.85.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" + tb.clientInline()
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp\ndev wlrs0\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n" + serverCreds +
			"push \"dhcp-option DNS 10.9.0.1\"\nkeepalive 10 60\n",
		"cli1.ovpn": cliConf,
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
	srv := startHelper(t, tb.srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	cli := startHelperEnv(t, tb.cliNS, env, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	first := "-a wlc0 -m 0 -x\nnameserver 10.9.0.1\n"
	if got := calls(); got != first {
		t.Fatalf("resolvconf calls:\n%s", got)
	}
	session := func() ClientStatus {
		t.Helper()
		st, ok, err := FindRunning("wlrs0")
		if err != nil || !ok || len(st.Clients) != 1 {
			t.Fatalf("server status: %+v %v %v", st, ok, err)
		}
		return st.Clients[0]
	}
	netns.Eventually(t, 5*time.Second, "the client in the server's status", func() error {
		if st, ok, _ := FindRunning("wlrs0"); !ok || len(st.Clients) != 1 {
			return os.ErrNotExist
		}
		return nil
	})
	before := session()
	reload := func(dry bool) (*Plan, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, _, err := ReloadRunning(ctx, "wlc0", dry)
		return p, err
	}
	if p, err := reload(false); err != nil || !p.Empty() {
		t.Fatalf("unchanged file: %+v %v", p, err)
	}
	tb.write(t, map[string]string{"cli1.ovpn": cliConf + "dhcp-option DNS 10.9.0.99\nconnect-retry 5\n"})
	p, err := reload(false)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	text := strings.Join(append(p.Lines, p.Notes...), "\n")
	for _, want := range []string{"dhcp-option: none -> dhcp-option DNS 10.9.0.99 (now)", "connectretry: changed (applies at the next reconnect)"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	second := "-a wlc0 -m 0 -x\nnameserver 10.9.0.99\nnameserver 10.9.0.1\n"
	if got := calls(); got != first+second {
		t.Errorf("resolvconf calls after the reload:\n%s\nwant:\n%s", got, first+second)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.1")
	time.Sleep(2500 * time.Millisecond) // a status file written after the reload
	if after := session(); after.KeyID != before.KeyID || !after.Since.Equal(before.Since) || after.PeerID != before.PeerID {
		t.Errorf("the session changed: %+v -> %+v", before, after)
	}
	tb.write(t, map[string]string{"cli1.ovpn": "client\nfragment 1300\n"})
	if _, err := reload(false); err == nil || !strings.Contains(err.Error(), "cli1.ovpn:2: fragment") {
		t.Errorf("broken file: %v", err)
	}
	if got := calls(); got != first+second {
		t.Errorf("a broken file called resolvconf:\n%s", got)
	}
}
