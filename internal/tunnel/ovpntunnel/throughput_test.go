package ovpntunnel

// Throughput comparison, run only on request:
//
//	WIRELANE_OVPN_BENCH=1 go test ./internal/tunnel/ovpntunnel -run Throughput -v
//
// Topology and configuration files are ovpnbed's, which the openvpn
// section of cmd/wirelane-bench shares (two namespaces joined by one veth
// pair, both tunnels up at once, AES-256-GCM over UDP on both):
//
//	otc (client side)                        ots (server side)
//	  wlc0 10.9.0.2   <- wirelane connect     wlsrv0 10.9.0.1  <- wirelane serve
//	  ovc0 10.10.0.2  <- openvpn client       ovs0  10.10.0.1  <- openvpn server
//	  t1 192.168.83.2  ==========veth==========  t2 192.168.83.1
//
// iperf3 TCP runs alternate between the two tunnels (upload, then
// download with -R), WIRELANE_OVPN_BENCH_ROUNDS rounds (default 3) of
// WIRELANE_OVPN_BENCH_SECONDS seconds (default 3); the test logs each run
// (with the sender's TCP retransmissions), the medians and the ratio.
// WIRELANE_OVPN_BENCH_DIR=up or down measures one direction only (for CPU
// profiles of one path; the other reads 0). WIRELANE_OVPN_BENCH_PROTO=tcp
// carries both tunnels over TCP instead of UDP (TCP in TCP: what matters
// there is the ratio, not the absolute figure).

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/tools/ovpnbed"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestThroughputVsOpenVPN(t *testing.T) {
	if os.Getenv("WIRELANE_OVPN_BENCH") == "" {
		t.Skip("throughput comparison runs only with WIRELANE_OVPN_BENCH=1 (takes about a minute)")
	}
	rounds, secs := envInt("WIRELANE_OVPN_BENCH_ROUNDS", 3), envInt("WIRELANE_OVPN_BENCH_SECONDS", 3)
	direction := os.Getenv("WIRELANE_OVPN_BENCH_DIR")
	proto := "udp"
	switch p := os.Getenv("WIRELANE_OVPN_BENCH_PROTO"); p {
	case "", "udp":
	case "tcp":
		proto = "tcp"
	default:
		t.Fatalf("WIRELANE_OVPN_BENCH_PROTO=%q: want udp or tcp", p)
	}

	tb := newTestbed(t, testbedConfig{ca: "Wirelane Bench CA", client: "client", srvNS: "ots", cliNS: "otc",
		srvIf: "t2", cliIf: "t1", net: ovpnbed.Net, need: []string{"openvpn", "iperf3", "ping"}})
	// WIRELANE_OVPN_BENCH_CIPHER picks the data cipher of all four ends
	// (default AES-256-GCM; AES-256-CBC measures the legacy channel, with
	// WIRELANE_OVPN_BENCH_AUTH as its HMAC, default SHA1). The files are
	// the ones cmd/wirelane-bench's openvpn section runs (ovpnbed).
	confs, err := ovpnbed.Configs(ovpnbed.Options{Proto: proto, Cipher: os.Getenv("WIRELANE_OVPN_BENCH_CIPHER"),
		Auth: os.Getenv("WIRELANE_OVPN_BENCH_AUTH"), ClientInline: tb.clientInline()})
	if err != nil {
		t.Fatal(err)
	}
	tb.write(t, confs)

	srv := startHelper(t, tb.srvNS, "serve", tb.path(ovpnbed.WirelaneServerConf))
	srv.waitFor(t, "listening on "+proto, 10*time.Second)
	cli := startHelper(t, tb.cliNS, "connect", "--dev", ovpnbed.WirelaneDev, "--mtu", strconv.Itoa(ovpnbed.WirelaneMTU), tb.path(ovpnbed.WirelaneClientConf))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	// Stop both with Ctrl-C at the end, so CPU profiles (if asked for) are
	// written.
	defer func() { cli.interrupt(t); srv.interrupt(t) }()

	tb.startOpenVPN(t, tb.srvNS, ovpnbed.OpenVPNServerConf)
	tb.startOpenVPN(t, tb.cliNS, ovpnbed.OpenVPNClientConf) // the client prints the same line once connected
	netns.Eventually(t, 20*time.Second, "openvpn tunnel up", func() error {
		_, err := netns.Try(tb.cliNS, nil, "ping", "-c", "1", "-W", "1", ovpnbed.OpenVPNAddr)
		return err
	})
	netns.Run(t, tb.cliNS, "ping", "-c", "1", "-W", "2", ovpnbed.WirelaneAddr)

	type impl struct {
		name, addr string
		up, down   []float64 // Mbit/s
	}
	impls := []*impl{{name: "wirelane", addr: ovpnbed.WirelaneAddr}, {name: "openvpn 2.6", addr: ovpnbed.OpenVPNAddr}}
	run := func(addr string, reverse bool) float64 {
		r := tb.runIperf(t, addr, secs, reverse)
		t.Logf("  %s%s: %.0f Mbit/s, %d TCP retransmissions", addr, map[bool]string{true: " -R"}[reverse], r.Mbps, r.Retransmits)
		return r.Mbps
	}
	for r := 0; r < rounds; r++ {
		for _, im := range impls {
			var up, down float64
			if direction != "down" {
				up = run(im.addr, false)
			}
			if direction != "up" {
				down = run(im.addr, true)
			}
			im.up, im.down = append(im.up, up), append(im.down, down)
			t.Logf("round %d %-12s upload %7.0f Mbit/s, download %7.0f Mbit/s", r+1, im.name, up, down)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s)%2 == 0 {
			return (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
		return s[len(s)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "iperf3 TCP over OpenVPN on %s, %d rounds of %d s, medians:\n", proto, rounds, secs)
	for _, im := range impls {
		fmt.Fprintf(&b, "  %-12s upload %7.0f Mbit/s, download %7.0f Mbit/s\n", im.name, median(im.up), median(im.down))
	}
	w, o := impls[0], impls[1]
	fmt.Fprintf(&b, "  ratio        upload %7.2fx, download %7.2fx", median(w.up)/median(o.up), median(w.down)/median(o.down))
	t.Log(b.String())
	if median(w.up)+median(w.down) <= 0 || median(o.up)+median(o.down) <= 0 {
		t.Fatal("no throughput measured")
	}
	if out, err := exec.Command("openvpn", "--version").Output(); err == nil {
		t.Logf("reference: %s", strings.SplitN(string(out), "\n", 2)[0])
	}
}
