package e2e

// The WireGuard engine's drop counters, provoked for real and read
// through the service: the tunnel's device runs in its own `wirelaned
// IFNAME` daemon, so the counts cross the UAPI socket (get=1 with
// wirelane_counters=1) into /metrics, the counters endpoint and
// `wirelane show`.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestServiceWireGuardDrops: 20 junk datagrams (no WireGuard message
// type) and 5 transport messages for a session index nobody holds, sent
// from the peer's namespace to a WireGuard tunnel of the service, are
// dropped and counted by its daemon:
// wirelane_wireguard_dropped_packets_total{reason="malformed"} goes from 0
// to 20 and {reason="unknown_index"} to 5 in /metrics and in GET
// .../counters; the tunnel still carries traffic; `wirelane show NAME`
// through the service prints the drops on one line; and `wg show` still
// reads the daemon (its plain get=1 carries no counter).
func TestServiceWireGuardDrops(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)
	series := func(reason string) string {
		return `wirelane_wireguard_dropped_packets_total{reason="` + reason + `",tunnel="` + sb.a + `"}`
	}
	m, err := sb.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"malformed", "unknown_index"} {
		if v := sample(string(m), series(r)); v != 0 {
			t.Fatalf("before any junk: %s = %v, want 0 (-1: not exported)", series(r), v)
		}
	}

	// bash's /dev/udp: one datagram per redirection, from nsB to the
	// tunnel's port. A transport message is type 4, three zero bytes, the
	// receiver index (0xdeadbeef), then counter and tag (24 bytes here).
	dst := fmt.Sprintf("/dev/udp/10.77.0.1/%d", sb.portA)
	script := `for i in $(seq 20); do printf 'not a WireGuard message' > ` + dst + `; done
for i in $(seq 5); do printf '\x04\x00\x00\x00\xef\xbe\xad\xde%024d' 0 > ` + dst + `; done`
	netns.Run(t, sb.nsB, "bash", "-c", script)
	netns.Eventually(t, 10*time.Second, "the drops counted", func() error {
		if m, err = sb.c.Metrics(ctx); err != nil {
			return err
		}
		if v := sample(string(m), series("malformed")); v != 20 {
			return fmt.Errorf("%s = %v", series("malformed"), v)
		}
		if v := sample(string(m), series("unknown_index")); v != 5 {
			return fmt.Errorf("%s = %v", series("unknown_index"), v)
		}
		return nil
	})
	if v := sample(string(m), series("decrypt")); v != 0 {
		t.Errorf("%s = %v, want 0: nothing forged reached a session", series("decrypt"), v)
	}
	checkExposition(t, m)
	cs, err := sb.c.Counters(ctx, sb.a)
	if err != nil {
		t.Fatal(err)
	}
	if v := counterValue(cs, "wirelane_wireguard_dropped_packets_total", "malformed"); v != 20 {
		t.Errorf("GET .../counters: dropped malformed = %v, want 20: %+v", v, cs)
	}

	// The junk did no harm: the tunnel still works.
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.78.0.2")
	out := netns.RunEnv(t, nil, []string{"WIRELANE_SOCKET=" + sb.socket}, filepath.Join(binDir, "wirelane"), "show", sb.a)
	// One line for every reason (a packet of the host's for no peer, an
	// IPv6 solicitation, may be among them), before the peer.
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  dropped: ") {
			line = l
		}
	}
	if !strings.Contains(line, " malformed 20,") || !strings.HasSuffix(line, " unknown_index 5") && !strings.Contains(line, " unknown_index 5,") ||
		strings.Index(out, line) > strings.Index(out, "peer: ") || !strings.Contains(out, "latest handshake") {
		t.Errorf("wirelane show %s through the service:\n%s", sb.a, out)
	}
	if out := netns.Run(t, sb.nsA, "wg", "show", sb.a); !strings.Contains(out, "latest handshake") || strings.Contains(out, "wirelane_") {
		t.Errorf("wg show:\n%s", out)
	}
}
