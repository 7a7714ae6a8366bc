package e2e

// The engine counters in the service's /metrics, read from a real
// `wirelaned IFNAME` daemon over its UAPI socket, and scraped by a real
// Prometheus server (Debian's prometheus package) in the service's
// namespace.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// restartWithMetrics restarts the bed's service with --metrics-address.
func (sb *serviceBed) restartWithMetrics(t *testing.T, addr string) {
	t.Helper()
	sb.stop(t)
	sb.proc = netns.StartEnv(t, sb.nsA, []string{"WIRELANE_FIREWALL=off"}, filepath.Join(binDir, "wirelaned"),
		"--socket", sb.socket, "--metrics-address", addr,
		"--wireguard-dir", filepath.Join(sb.dir, "wireguard"), "--wirelane-dir", filepath.Join(sb.dir, "wirelane"))
	netns.Eventually(t, 5*time.Second, "the service's socket answers", func() error {
		select {
		case <-sb.proc.Exited():
			t.Fatalf("the service exited:\n%s", sb.proc.Output())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := sb.c.List(ctx)
		return err
	})
}

// sample returns the value of the series of the exposition whose name and
// labels start as prefix ("name{label=\"v\""), or -1 when there is none.
func sample(exposition, prefix string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// TestServiceEngineCounters: before any traffic the WireGuard tunnel's
// handshake counters are 0; a real handshake (a ping through the tunnel)
// moves the initiations and the completed handshakes, the endpoint's route
// publication, and nothing is rejected; the OpenVPN-free exposition passes
// `promtool check metrics`, and a real Prometheus server scraping the
// service's TCP address answers a PromQL query for the completed
// handshakes and the peer's transfer.
func TestServiceEngineCounters(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("the Prometheus server is not installed (apt package prometheus)")
	}
	sb := newServiceBed(t)
	const metricsAddr = "127.0.0.1:9586"
	sb.restartWithMetrics(t, metricsAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)
	tun := `{tunnel="` + sb.a + `"`
	completed := `wirelane_wireguard_handshakes_completed_total{role="initiator",tunnel="` + sb.a + `"}`
	before, err := sb.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := sample(string(before), completed); v != 0 {
		t.Fatalf("before any traffic: %s = %v, want 0\n%s", completed, v, before)
	}

	netns.Run(t, sb.nsA, "ping", "-c", "3", "-i", "0.3", "-W", "2", "10.78.0.2")
	var after string
	netns.Eventually(t, 5*time.Second, "the handshake counted", func() error {
		b, err := sb.c.Metrics(ctx)
		if err != nil {
			return err
		}
		after = string(b)
		if v := sample(after, completed); v < 1 {
			return fmt.Errorf("%s = %v", completed, v)
		}
		return nil
	})
	for _, want := range []string{"wirelane_wireguard_handshake_initiations_total" + tun, "wirelane_wireguard_route_publications_total" + tun} {
		if v := sample(after, want); v < 1 {
			t.Errorf("%s = %v after a handshake, want >= 1", want, v)
		}
	}
	for _, zero := range []string{`wirelane_wireguard_handshakes_rejected_total{reason="mac1",tunnel="` + sb.a + `"}`, `wirelane_wireguard_dropped_packets_total{reason="decrypt",tunnel="` + sb.a + `"}`, `wirelane_socket_errors_total{op="send",tunnel="` + sb.a + `"}`} {
		if v := sample(after, zero); v != 0 {
			t.Errorf("%s = %v, want 0", zero, v)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(after)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
	// wg(8) still reads the daemon (it asks the plain get=1).
	if out := netns.Run(t, sb.nsA, "wg", "show", sb.a); !strings.Contains(out, "latest handshake") {
		t.Errorf("wg show:\n%s", out)
	}

	// A real Prometheus server in the service's namespace.
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: wirelane\n    static_configs:\n      - targets: [%q]\n", metricsAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const web = "127.0.0.1:19590"
	p := netns.Start(t, sb.nsA, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
	// promtool (same package) asks the server's HTTP API from inside the
	// namespace.
	query := func(q string) (float64, error) {
		out, err := netns.Try(sb.nsA, nil, "promtool", "query", "instant", "http://"+web, q)
		if err != nil {
			return 0, fmt.Errorf("%v: %s", err, out)
		}
		m := promResult.FindStringSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("no sample yet: %q", out)
		}
		return strconv.ParseFloat(m[1], 64)
	}
	for _, q := range []string{
		`sum(wirelane_wireguard_handshakes_completed_total` + tun + `})`,
		`wireguard_peer_receive_bytes_total{device="` + sb.a + `"}`,
	} {
		netns.Eventually(t, 60*time.Second, "Prometheus answers "+q, func() error {
			select {
			case <-p.Exited():
				t.Fatalf("prometheus exited:\n%s", p.Output())
			default:
			}
			v, err := query(q)
			if err != nil {
				return err
			}
			if v < 1 {
				return fmt.Errorf("%s = %v", q, v)
			}
			return nil
		})
	}
}

// promResult is the value in promtool's answer to an instant query
// ("{...} => 3 @[1764633600.123]").
var promResult = regexp.MustCompile(`=> ([0-9.e+-]+) @`)
