package ovpncli

// Throughput comparison, run only on request:
//
//	WIRELANE_OVPN_BENCH=1 go test ./ovpn/ovpncli -run Throughput -v
//
// Topology (two namespaces joined by one veth pair, both tunnels up at
// once, AES-256-GCM over UDP on both). Wirelane's TUN MTU is 1400 so that
// encapsulated packets fit the 1500-byte link unfragmented; OpenVPN keeps
// its defaults (tun-mtu 1500 with mssfix, which clamps TCP to the same
// effect), and runs without the DCO kernel module:
//
//	otc (client side)                        ots (server side)
//	  wlc0 10.9.0.2   <- wirelane connect     wlsrv0 10.9.0.1  <- wirelane serve
//	  ovc0 10.10.0.2  <- openvpn client       ovs0  10.10.0.1  <- openvpn server
//	  t1 192.168.83.2  ==========veth==========  t2 192.168.83.1
//
// iperf3 TCP runs alternate between the two tunnels (upload, then
// download with -R), WIRELANE_OVPN_BENCH_ROUNDS rounds (default 3) of
// WIRELANE_OVPN_BENCH_SECONDS seconds (default 3); the test logs each run,
// the medians and the ratio.

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/netns"
	"github.com/wirelane/wirelane/ovpn/internal/testpki"
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
	if os.Geteuid() != 0 {
		t.Skip("throughput comparison needs root (network namespaces and TUN devices)")
	}
	netns.Need(t, "openvpn", "iperf3")
	rounds, secs := envInt("WIRELANE_OVPN_BENCH_ROUNDS", 3), envInt("WIRELANE_OVPN_BENCH_SECONDS", 3)

	pki := testpki.New(t, "Wirelane Bench CA")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "client", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	oldDir := StatusDir
	StatusDir = filepath.Join(dir, "run")
	t.Cleanup(func() { StatusDir = oldDir })
	creds := "ca ca.crt\ncert server.crt\nkey server.key\ndh none\ndata-ciphers AES-256-GCM\nkeepalive 10 60\n"
	inline := "<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	files := map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey),
		"wl-server.conf": "port 1194\nproto udp4\ndev wlsrv0\ntun-mtu 1400\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n" + creds,
		"wl-client.ovpn": "client\ndev tun\nremote 192.168.83.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" + inline,
		"ov-server.conf": "port 1195\nproto udp4\nlocal 192.168.83.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.10.0.0 255.255.255.0\ndisable-dco\nverb 3\n" + creds,
		"ov-client.ovpn": "client\ndev ovc0\ndev-type tun\nremote 192.168.83.1 1195 udp4\nnobind\nremote-cert-tls server\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nverb 3\n" + inline,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srvNS, cliNS := netns.New(t, "ots"), netns.New(t, "otc")
	netns.Veth(t, srvNS, "t2", cliNS, "t1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.83.1/24", "dev", "t2")
	netns.Run(t, cliNS, "ip", "addr", "add", "192.168.83.2/24", "dev", "t1")

	srv := startHelper(t, srvNS, "serve", filepath.Join(dir, "wl-server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	cli := startHelper(t, cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", filepath.Join(dir, "wl-client.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	// Stop both with Ctrl-C at the end, so CPU profiles (if asked for) are
	// written.
	defer func() { cli.interrupt(t); srv.interrupt(t) }()

	ovs := netns.Start(t, srvNS, "openvpn", "--cd", dir, "--config", "ov-server.conf")
	ovc := netns.Start(t, cliNS, "openvpn", "--cd", dir, "--config", "ov-client.ovpn")
	netns.Eventually(t, 20*time.Second, "openvpn tunnel up", func() error {
		select {
		case <-ovs.Exited():
			return fmt.Errorf("openvpn server exited: %s", ovs.Output())
		case <-ovc.Exited():
			return fmt.Errorf("openvpn client exited: %s", ovc.Output())
		default:
		}
		_, err := netns.Try(cliNS, nil, "ping", "-c", "1", "-W", "1", "10.10.0.1")
		return err
	})
	netns.Run(t, cliNS, "ping", "-c", "1", "-W", "2", "10.9.0.1")

	type impl struct {
		name, addr string
		up, down   []float64 // Mbit/s
	}
	impls := []*impl{{name: "wirelane", addr: "10.9.0.1"}, {name: "openvpn 2.6", addr: "10.10.0.1"}}
	port := 5301
	run := func(addr string, reverse bool) float64 {
		port++
		p := strconv.Itoa(port)
		netns.Start(t, srvNS, "iperf3", "-s", "-1", "-B", addr, "-p", p)
		args := []string{"iperf3", "-c", addr, "-p", p, "-t", strconv.Itoa(secs), "-J"}
		if reverse {
			args = append(args, "-R")
		}
		var mbps float64
		netns.Eventually(t, 5*time.Second, "iperf3 run", func() error {
			out, err := netns.Try(cliNS, nil, args...)
			var res struct {
				End struct {
					SumReceived struct {
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
					SumSent struct {
						Retransmits int `json:"retransmits"`
					} `json:"sum_sent"`
				} `json:"end"`
				Error string `json:"error"`
			}
			if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
				return fmt.Errorf("%v: %s", jerr, out)
			}
			if res.Error != "" || err != nil {
				return fmt.Errorf("iperf3: %s %v", res.Error, err)
			}
			mbps = res.End.SumReceived.BitsPerSecond / 1e6
			t.Logf("  %s%s: %.0f Mbit/s, %d TCP retransmissions", addr, map[bool]string{true: " -R"}[reverse], mbps, res.End.SumSent.Retransmits)
			return nil
		})
		return mbps
	}
	// WIRELANE_OVPN_BENCH_DIR=up or down measures one direction only (for
	// CPU profiles of one path); the other reads 0.
	dir1 := os.Getenv("WIRELANE_OVPN_BENCH_DIR")
	for r := 0; r < rounds; r++ {
		for _, im := range impls {
			var up, down float64
			if dir1 != "down" {
				up = run(im.addr, false)
			}
			if dir1 != "up" {
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
	fmt.Fprintf(&b, "iperf3 TCP, %d rounds of %d s, medians:\n", rounds, secs)
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
