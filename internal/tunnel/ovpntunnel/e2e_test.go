package ovpntunnel

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Serve and Connect against each other: the client's namespace gets the
// pushed address and route, pings cross the tunnel, and Ctrl-C on either
// side removes what it added.
func TestE2EConnectServe(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane CLI Test CA", client: "cli1", srvNS: "ocs", cliNS: "occ",
		srvIf: "s1", cliIf: "c1", net: "192.168.81", need: []string{"ping"}})
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	tb.write(t, map[string]string{
		"ta.key": string(k.Format()),
		"server.conf": "port 1194\nproto udp\ndev wlsrv0\ntopology subnet\nserver 10.9.0.0 255.255.255.0\nserver-ipv6 fd09::/64\n" + serverCreds +
			"tls-crypt ta.key\ndata-ciphers CHACHA20-POLY1305:AES-256-GCM\npush \"route 10.98.0.0 255.255.255.0\"\n" +
			"push \"redirect-gateway def1\"\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.81.1 1194 udp\nremote 192.168.81.77 1194 udp\nnobind\nremote-cert-tls server\n" +
			tb.clientInline() + "<tls-crypt>\n" + string(k.Format()) + "</tls-crypt>\n",
	})
	srvNS, cliNS := tb.srvNS, tb.cliNS
	netns.Run(t, srvNS, "ip", "addr", "add", "10.98.0.1/32", "dev", "lo")

	srv := startHelper(t, srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	cli := startHelper(t, cliNS, "connect", "--dev", "wlc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	for _, want := range []string{"pushed options: address 10.9.0.2/24, gateway 10.9.0.1, IPv6 fd09::1000/64 (remote fd09::1), 1 route, redirect-gateway def1, cipher CHACHA20-POLY1305, peer-id 0",
		"device wlc0: 10.9.0.2/24", "routes added (3): 10.98.0.0/24, 0.0.0.0/1, 128.0.0.0/1 via 10.9.0.1; default route through the tunnel (redirect-gateway def1)"} {
		if !strings.Contains(cli.out.String(), want) {
			t.Fatalf("connect output lacks %q:\n%s", want, cli.out.String())
		}
	}
	srv.waitFor(t, `client "cli1" connected from 192.168.81.2`, 5*time.Second)
	if a := netns.Run(t, cliNS, "ip", "-4", "addr", "show", "dev", "wlc0"); !strings.Contains(a, "10.9.0.2/24") {
		t.Fatalf("wlc0 addresses:\n%s", a)
	}
	if r := netns.Run(t, cliNS, "ip", "-4", "route", "show", "dev", "wlc0"); !strings.Contains(r, "10.98.0.0/24 via 10.9.0.1") {
		t.Fatalf("wlc0 routes:\n%s", r)
	}
	// redirect-gateway: the two halves through the tunnel and a host route
	// for the server that answered, none for the remote never tried.
	all := netns.Run(t, cliNS, "ip", "-4", "route", "show")
	for _, want := range []string{"0.0.0.0/1 via 10.9.0.1 dev wlc0", "128.0.0.0/1 via 10.9.0.1 dev wlc0", "192.168.81.1 dev c1"} {
		if !strings.Contains(all, want) {
			t.Fatalf("routes lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "192.168.81.77") {
		t.Fatalf("a host route for the remote that was not used:\n%s", all)
	}
	netns.Run(t, cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.9.0.1")
	netns.Run(t, cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.98.0.1")
	netns.Run(t, srvNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2")
	// server-ipv6: both ends carry their IPv6 address and reach each other.
	if a := netns.Run(t, cliNS, "ip", "-6", "addr", "show", "dev", "wlc0"); !strings.Contains(a, "fd09::1000/64") {
		t.Fatalf("wlc0 IPv6 addresses:\n%s", a)
	}
	netns.Run(t, cliNS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd09::1")
	netns.Run(t, srvNS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd09::1000")

	// Both tunnels appear in the status files.
	var tunnels []TunnelStatus
	netns.Eventually(t, 5*time.Second, "status of both tunnels with traffic", func() error {
		var err error
		if tunnels, err = Status(); err != nil {
			return err
		}
		if len(tunnels) != 2 || len(tunnels[1].Clients) != 1 || tunnels[0].RxBytes == 0 || tunnels[1].RxBytes == 0 {
			return fmt.Errorf("got %+v", tunnels)
		}
		return nil
	})
	c, sv := tunnels[0], tunnels[1] // ordered by interface: wlc0, wlsrv0
	if c.Kind != KindClient || c.Interface != "wlc0" || c.Remote != "192.168.81.1:1194" || c.Address != "10.9.0.2/24" || c.Address6 != "fd09::1000/64" ||
		c.Cipher != "CHACHA20-POLY1305" || c.Proto != "UDPv4" || c.Since.IsZero() {
		t.Fatalf("client status %+v", c)
	}
	if sv.Kind != KindServer || sv.Interface != "wlsrv0" || sv.Address != "10.9.0.1/24" || sv.Address6 != "fd09::1/64" || sv.Clients[0].CommonName != "cli1" ||
		sv.Clients[0].Address6 != "fd09::1000" ||
		sv.Clients[0].Address != "10.9.0.2" || sv.Clients[0].RxBytes == 0 {
		t.Fatalf("server status %+v", sv)
	}
	var text strings.Builder
	FormatStatus(&text, tunnels)
	t.Logf("status:\n%s", text.String())

	cli.interrupt(t)
	if tunnels, err := Status(); err != nil || len(tunnels) != 1 || tunnels[0].Kind != KindServer {
		t.Fatalf("status after the client left: %+v, %v", tunnels, err)
	}
	if !strings.Contains(cli.out.String(), "removed routes and wlc0") {
		t.Fatalf("connect output after SIGINT:\n%s", cli.out.String())
	}
	if out, err := netns.Try(cliNS, nil, "ip", "link", "show", "wlc0"); err == nil {
		t.Fatalf("wlc0 still exists after disconnect:\n%s", out)
	}
	srv.waitFor(t, `client "cli1" (10.9.0.2 and fd09::1000) left: the client sent an exit notification`, 5*time.Second)
	srv.interrupt(t)
	if names, _ := filepath.Glob(filepath.Join(StatusDir, "*")); len(names) != 0 {
		t.Fatalf("status files left after exit: %v", names)
	}
	if out, err := netns.Try(srvNS, nil, "ip", "link", "show", "wlsrv0"); err == nil {
		t.Fatalf("wlsrv0 still exists after the server stopped:\n%s", out)
	}
	t.Logf("connect output:\n%s\nserve output:\n%s", cli.out.String(), srv.out.String())
}
