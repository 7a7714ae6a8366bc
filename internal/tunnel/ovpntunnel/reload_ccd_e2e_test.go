package ovpntunnel

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestE2EReloadClientConfigDir runs `wirelane ovpn serve` with a
// client-config-dir and two real OpenVPN 2.6 clients, each in its own
// namespace with a network behind it (an address on its loopback):
//   - gw gets its fixed address (ifconfig-push) and the server side
//     reaches the network behind it (route + iroute);
//   - a reload moving desk's iroute applies at once (the server side
//     reaches desk's new network, no longer the old one) and leaves gw
//     untouched: no ping lost every 10 ms either way, same session and key;
//   - a reload setting `disable` in desk's file disconnects it with
//     AUTH_FAILED; gw stays;
//   - a new ifconfig-push address for gw: it is told RESTART and comes
//     back with the new address.
func TestE2EReloadClientConfigDir(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane CCD CA", client: "gw", srvNS: "orcs", cliNS: "orcg",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"openvpn", "ping"}})
	deskNS := netns.New(t, "orcd")
	netns.Veth(t, tb.srvNS, "s2", deskNS, "c2")
	netns.Run(t, tb.srvNS, "ip", "addr", "add", "192.168.88.1/24", "dev", "s2")
	netns.Run(t, deskNS, "ip", "addr", "add", "192.168.88.2/24", "dev", "c2")
	netns.Run(t, tb.cliNS, "ip", "addr", "add", "10.60.0.1/32", "dev", "lo")
	netns.Run(t, deskNS, "ip", "addr", "add", "10.61.0.1/32", "dev", "lo")
	netns.Run(t, deskNS, "ip", "addr", "add", "10.62.0.1/32", "dev", "lo")
	deskCert, deskKey := tb.pki.Valid(t, "desk", x509.ExtKeyUsageClientAuth)
	client := func(name, remote string) string {
		return "client\ndev tun\nproto udp\nremote " + remote + " 1194\nnobind\nremote-cert-tls server\nca ca.crt\ncert " + name + ".crt\nkey " + name +
			".key\ndata-ciphers AES-256-GCM\ndisable-dco\nconnect-retry 1\nverb 4\n"
	}
	if err := os.Mkdir(tb.path("ccd"), 0o700); err != nil {
		t.Fatal(err)
	}
	tb.write(t, map[string]string{
		"gw.crt": string(tb.cliCert), "gw.key": string(tb.cliKey), "desk.crt": string(deskCert), "desk.key": string(deskKey),
		"server.conf": "port 1194\nproto udp\ndev wlrc0\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n" + serverCreds +
			"remote-cert-tls client\nkeepalive 10 60\ndata-ciphers AES-256-GCM\nclient-config-dir ccd\n" +
			"route 10.60.0.0 255.255.255.0\nroute 10.61.0.0 255.255.255.0\nroute 10.62.0.0 255.255.255.0\n",
		"gw.conf": client("gw", "192.168.87.1"), "desk.conf": client("desk", "192.168.88.1"),
		"ccd/gw":   "ifconfig-push 10.9.0.50 255.255.255.0\niroute 10.60.0.0 255.255.255.0\n",
		"ccd/desk": "iroute 10.61.0.0 255.255.255.0\n",
	})
	srv := startHelper(t, tb.srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	gw := tb.startOpenVPN(t, tb.cliNS, "gw.conf")
	desk := tb.startOpenVPN(t, deskNS, "desk.conf")
	srv.waitFor(t, `client "desk" connected`, 5*time.Second)
	if a := netns.Run(t, tb.cliNS, "ip", "-4", "-o", "addr"); !strings.Contains(a, "10.9.0.50/24") {
		t.Fatalf("gw lacks its fixed address 10.9.0.50/24:\n%s", a)
	}
	gwStatus := func() ClientStatus {
		t.Helper()
		st, ok, err := FindRunning("wlrc0")
		if err != nil || !ok {
			t.Fatalf("status of wlrc0: %v %v", ok, err)
		}
		for _, c := range st.Clients {
			if c.CommonName == "gw" {
				return c
			}
		}
		t.Fatalf("gw not in the status: %+v", st.Clients)
		return ClientStatus{}
	}
	var before ClientStatus
	netns.Eventually(t, 5*time.Second, "gw in the status", func() error {
		if before = gwStatus(); before.Address != "10.9.0.50" {
			return fmt.Errorf("gw's address %q", before.Address)
		}
		return nil
	})
	reaches := func(dst string) error {
		_, err := netns.Try(tb.srvNS, nil, "ping", "-c", "1", "-W", "1", dst)
		return err
	}
	for _, dst := range []string{"10.60.0.1", "10.61.0.1"} {
		netns.Eventually(t, 5*time.Second, "the server side reaches "+dst, func() error { return reaches(dst) })
	}
	if reaches("10.62.0.1") == nil {
		t.Fatal("10.62.0.1 reached before any iroute covers it")
	}
	reload := func() *Plan {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, _, err := ReloadRunning(ctx, tb.path("server.conf"), false)
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		return p
	}

	// Pings every 10 ms across the reload: gw to the server, and the
	// server side to the network behind gw.
	// -w: ping waits for every reply (a slow last one on a loaded
	// machine is not a loss) and sends more for each one lost, which
	// then shows as transmitted > received.
	pinger := func(ns *netns.NS, dst string) chan string {
		ch := make(chan string, 1)
		go func() {
			out, _ := netns.Command(ns, "ping", "-n", "-q", "-i", "0.01", "-W", "1", "-w", "15", "-c", "200", dst).CombinedOutput()
			ch <- string(out)
		}()
		return ch
	}
	toServer, behindGW := pinger(tb.cliNS, "10.9.0.1"), pinger(tb.srvNS, "10.60.0.1")
	time.Sleep(500 * time.Millisecond)
	tb.write(t, map[string]string{"ccd/desk": "iroute 10.62.0.0 255.255.255.0\n"})
	p := reload()
	text := strings.Join(p.Lines, "\n")
	if !strings.Contains(text, `client "desk": iroutes 10.61.0.0/24 -> 10.62.0.0/24 (at once)`) || strings.Contains(text, "disconnect") || strings.Contains(text, `"gw"`) {
		t.Errorf("iroute plan:\n%s", text)
	}
	if err := reaches("10.62.0.1"); err != nil {
		t.Errorf("desk's new iroute does not reach 10.62.0.1: %v", err)
	}
	if reaches("10.61.0.1") == nil {
		t.Error("desk's old iroute 10.61.0.0/24 is still routed")
	}
	loss := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)
	for what, ch := range map[string]chan string{"gw to the server": toServer, "the server side to gw's network": behindGW} {
		out := <-ch
		if m := loss.FindStringSubmatch(out); m == nil || m[1] != m[2] {
			t.Errorf("pings lost (%s) across the reload:\n%s", what, out)
		}
	}
	if after := gwStatus(); after.PeerID != before.PeerID || after.KeyID != before.KeyID || !after.Since.Equal(before.Since) || after.Address != before.Address {
		t.Errorf("gw's session changed: %+v -> %+v", before, after)
	}
	if strings.Contains(desk.out.String(), "AUTH_FAILED") || strings.Count(desk.out.String(), "Initialization Sequence Completed") != 1 {
		t.Errorf("desk reconnected for an iroute change:\n%s", desk.out.String())
	}

	// disable: desk is told AUTH_FAILED and gone; gw stays.
	tb.write(t, map[string]string{"ccd/desk": "iroute 10.62.0.0 255.255.255.0\ndisable\n"})
	p = reload()
	if text := strings.Join(p.Lines, "\n"); !strings.Contains(text, `disconnect client "desk"`) || !strings.Contains(text, `client "desk" is disabled`) {
		t.Errorf("disable plan:\n%s", text)
	}
	srv.waitFor(t, `left: reload: client "desk" is disabled`, 5*time.Second)
	select {
	case <-desk.done:
	case <-time.After(10 * time.Second):
		t.Error("the disabled openvpn client is still running")
	}
	if !strings.Contains(desk.out.String(), "AUTH_FAILED") {
		t.Errorf("desk was not told (no AUTH_FAILED in its log)")
	}
	if reaches("10.62.0.1") == nil {
		t.Error("the disabled client's iroute is still routed")
	}
	if err := reaches("10.60.0.1"); err != nil {
		t.Errorf("gw's network after desk was disabled: %v", err)
	}
	if after := gwStatus(); after.PeerID != before.PeerID || after.KeyID != before.KeyID {
		t.Errorf("gw's session changed: %+v -> %+v", before, after)
	}
	if strings.Count(gw.out.String(), "Initialization Sequence Completed") != 1 {
		t.Errorf("gw reconnected:\n%s", gw.out.String())
	}

	// A new fixed address: gw is told RESTART and comes back with it.
	tb.write(t, map[string]string{"ccd/gw": "ifconfig-push 10.9.0.51 255.255.255.0\niroute 10.60.0.0 255.255.255.0\n"})
	p = reload()
	if text := strings.Join(p.Lines, "\n"); !strings.Contains(text, `disconnect client "gw" (10.9.0.50): its address changes from 10.9.0.50 to 10.9.0.51`) {
		t.Errorf("address plan:\n%s", text)
	}
	gw.waitFor(t, "Connection reset command was pushed by server", 10*time.Second)
	netns.Eventually(t, 30*time.Second, "gw back with 10.9.0.51", func() error {
		if a := netns.Run(t, tb.cliNS, "ip", "-4", "-o", "addr"); !strings.Contains(a, "10.9.0.51/24") {
			return fmt.Errorf("gw's addresses:\n%s", a)
		}
		return reaches("10.60.0.1")
	})
}
