package ovpntunnel

import (
	"context"
	"crypto/x509"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestE2EReloadServer runs `wirelane ovpn serve` with two real OpenVPN
// 2.6 clients connected, each in its own namespace, each pinging the
// server every 10 ms (and one running an iperf3 stream), and reloads it through its control socket (as
// `wirelane reload` does):
//   - a file adding a route and a push line and a CRL revoking one client:
//     the route is on the server's device, the revoked client is told
//     (AUTH_FAILED) and gone, the other loses no ping (its stream goes
//     on) and keeps its
//     session (same peer-id, key id, start, no second initialisation, no
//     soft reset);
//   - a reload with no change makes no changing netlink call (ip monitor);
//   - a broken file (FILE:LINE) and a reload failing half-way (its second
//     route exists already) leave addresses and routes byte for byte as
//     they were, and the configuration in force too.
func TestE2EReloadServer(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Reload CA", client: "desk", srvNS: "ors", cliNS: "orc",
		srvIf: "s1", cliIf: "c1", net: "192.168.83", need: []string{"openvpn", "ping", "iperf3"}})
	lostNS := netns.New(t, "orl")
	netns.Veth(t, tb.srvNS, "s2", lostNS, "c2")
	netns.Run(t, tb.srvNS, "ip", "addr", "add", "192.168.84.1/24", "dev", "s2")
	netns.Run(t, lostNS, "ip", "addr", "add", "192.168.84.2/24", "dev", "c2")
	lostCert, lostKey := tb.pki.Valid(t, "lost", x509.ExtKeyUsageClientAuth)
	client := func(name, remote string) string {
		return "client\ndev tun\nproto udp\nremote " + remote + " 1194\nnobind\nremote-cert-tls server\nca ca.crt\ncert " + name + ".crt\nkey " + name +
			".key\ndata-ciphers AES-256-GCM\ndisable-dco\nverb 4\n"
	}
	base := "port 1194\nproto udp\ndev wlrl0\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n" + serverCreds +
		"remote-cert-tls client\ncrl-verify crl.pem\nkeepalive 10 60\ndata-ciphers AES-256-GCM\n"
	tb.write(t, map[string]string{
		"crl.pem": string(tb.pki.CurrentCRL(t)), "desk.crt": string(tb.cliCert), "desk.key": string(tb.cliKey),
		"lost.crt": string(lostCert), "lost.key": string(lostKey),
		"server.conf": base, "desk.conf": client("desk", "192.168.83.1"), "lost.conf": client("lost", "192.168.84.1"),
	})
	srv := startHelper(t, tb.srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	desk := tb.startOpenVPN(t, tb.cliNS, "desk.conf")
	lost := tb.startOpenVPN(t, lostNS, "lost.conf")
	srv.waitFor(t, `client "lost" connected`, 5*time.Second)

	clients := func() map[string]ClientStatus {
		t.Helper()
		st, ok, err := FindRunning("wlrl0")
		if err != nil || !ok {
			t.Fatalf("status of wlrl0: %v %v", ok, err)
		}
		out := map[string]ClientStatus{}
		for _, c := range st.Clients {
			out[c.CommonName] = c
		}
		return out
	}
	var before ClientStatus
	netns.Eventually(t, 5*time.Second, "both clients in the status", func() error {
		cs := clients()
		if len(cs) != 2 {
			return fmt.Errorf("%v", cs)
		}
		before = cs["desk"]
		return nil
	})
	host := func() string {
		return netns.Run(t, tb.srvNS, "ip", "addr") + netns.Run(t, tb.srvNS, "ip", "route", "show", "table", "all")
	}
	reload := func(dry bool) (*Plan, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, _, err := ReloadRunning(ctx, tb.path("server.conf"), dry)
		return p, err
	}
	if p, err := reload(false); err != nil || !p.Empty() {
		t.Fatalf("reload of the unchanged file: %+v, %v", p, err)
	}

	// Pings every 10 ms from both clients across the reload.
	type pingResult struct {
		sent, got int
		out       string
	}
	pinger := func(ns *netns.NS, n int) chan pingResult {
		ch := make(chan pingResult, 1)
		go func() {
			out, _ := netns.Command(ns, "ping", "-n", "-q", "-i", "0.01", "-W", "1", "-c", fmt.Sprint(n), "10.9.0.1").CombinedOutput()
			m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(string(out))
			r := pingResult{out: string(out)}
			if m != nil {
				fmt.Sscan(m[1], &r.sent)
				fmt.Sscan(m[2], &r.got)
			}
			ch <- r
		}()
		return ch
	}
	iperfd := netns.Start(t, tb.srvNS, "iperf3", "-s", "-1", "-B", "10.9.0.1", "-p", "5399")
	time.Sleep(200 * time.Millisecond)
	stream := netns.Start(t, tb.cliNS, "iperf3", "-c", "10.9.0.1", "-p", "5399", "-t", "3", "-b", "50M", "-J", "--connect-timeout", "2000")
	deskPing := pinger(tb.cliNS, 300)
	lostPing := pinger(lostNS, 300)
	time.Sleep(time.Second)
	tb.write(t, map[string]string{
		"crl.pem":     string(tb.pki.CurrentCRL(t, testpki.Serial(t, lostCert))),
		"server.conf": base + "route 10.66.0.0 255.255.0.0\npush \"route 10.77.0.0 255.255.0.0\"\n",
	})
	if p, err := reload(true); err != nil || !strings.Contains(strings.Join(p.Lines, "\n"), `disconnect client "lost"`) {
		t.Fatalf("dry run: %+v, %v", p, err)
	}
	if strings.Contains(netns.Run(t, tb.srvNS, "ip", "route"), "10.66.0.0") {
		t.Fatal("the dry run added the route")
	}
	p, err := reload(false)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	text := strings.Join(p.Lines, "\n")
	for _, want := range []string{"route: added 10.66.0.0/16", `push: added "route 10.77.0.0 255.255.0.0"`, `disconnect client "lost" (10.9.0.3): certificate no longer accepted`} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if r := netns.Run(t, tb.srvNS, "ip", "route", "show", "10.66.0.0/16"); !strings.Contains(r, "dev wlrl0") {
		t.Errorf("route 10.66.0.0/16 not on wlrl0: %q", r)
	}
	srv.waitFor(t, `client "lost" (10.9.0.3) left: reload: certificate no longer accepted`, 5*time.Second)
	select {
	case <-lost.done:
	case <-time.After(10 * time.Second):
		t.Error("the revoked openvpn client is still running")
	}
	if !strings.Contains(lost.out.String(), "AUTH_FAILED") {
		t.Errorf("the revoked client was not told (no AUTH_FAILED in its log)")
	}
	r := <-deskPing
	if r.sent == 0 || r.got != r.sent {
		t.Errorf("desk lost pings across the reload: %d of %d\n%s", r.sent-r.got, r.sent, r.out)
	}
	if out, err := stream.Wait(t, 10*time.Second); err != nil || !strings.Contains(out, `"sum_received"`) || strings.Contains(out, `"error"`) {
		t.Errorf("desk's iperf3 stream broke during the reload: %v\n%s", err, out)
	}
	iperfd.Wait(t, 5*time.Second)
	if lr := <-lostPing; lr.got == lr.sent {
		t.Errorf("the revoked client's pings all went through: %+v", lr)
	}
	after := clients()["desk"]
	if after.PeerID != before.PeerID || after.KeyID != before.KeyID || !after.Since.Equal(before.Since) || after.Address != before.Address {
		t.Errorf("desk's session changed: %+v -> %+v", before, after)
	}
	if log := desk.out.String(); strings.Count(log, "Initialization Sequence Completed") != 1 || strings.Contains(log, "soft reset") {
		t.Errorf("desk reconnected or renegotiated:\n%s", log)
	}

	// No change: no changing netlink message at all.
	mon := exec.Command("ip", "-n", tb.srvNS.Name, "monitor", "link", "address", "route", "rule")
	var monOut syncBuffer
	mon.Stdout, mon.Stderr = &monOut, &monOut
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if p, err := reload(false); err != nil || !p.Empty() {
		t.Errorf("second reload: %+v, %v", p, err)
	}
	time.Sleep(300 * time.Millisecond)
	mon.Process.Kill()
	mon.Wait()
	if s := strings.TrimSpace(monOut.String()); s != "" {
		t.Errorf("a reload with no change changed the namespace:\n%s", s)
	}

	// A broken file, then a change that fails half-way: nothing changes.
	good := base + "route 10.66.0.0 255.255.0.0\npush \"route 10.77.0.0 255.255.0.0\"\n"
	was := host()
	tb.write(t, map[string]string{"server.conf": good + "tun-mtu 100\n"})
	if _, err := reload(false); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("server.conf:%d: tun-mtu: MTU 100 is below 576", strings.Count(good, "\n")+1)) {
		t.Errorf("broken file: %v", err)
	}
	if now := host(); now != was {
		t.Errorf("a broken file changed the namespace:\nbefore:\n%s\nafter:\n%s", was, now)
	}
	netns.Run(t, tb.srvNS, "ip", "route", "add", "10.55.0.0/16", "dev", "lo")
	was = host()
	tb.write(t, map[string]string{"server.conf": good + "route 10.44.0.0 255.255.0.0\nroute 10.55.0.0 255.255.0.0\npush \"route 10.88.0.0 255.255.0.0\"\n"})
	if _, err := reload(false); err == nil || !strings.Contains(err.Error(), "10.55.0.0/16") || !strings.Contains(err.Error(), "the tunnel is as it was") {
		t.Errorf("half-failing reload: %v", err)
	}
	if now := host(); now != was {
		t.Errorf("a failed reload changed the namespace:\nbefore:\n%s\nafter:\n%s", was, now)
	}
	tb.write(t, map[string]string{"server.conf": good})
	if p, err := reload(true); err != nil || !p.Empty() {
		t.Errorf("the configuration in force changed after the failed reloads: %+v, %v", p, err)
	}
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.1")
	if c := clients()["desk"]; c.KeyID != before.KeyID || c.PeerID != before.PeerID {
		t.Errorf("desk's session changed: %+v -> %+v", before, c)
	}
}
