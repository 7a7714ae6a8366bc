package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// TestTransferCountsLikeTheKernel is the kernel self-test's transfer check
// (netns.sh, after its first ten pings): wg show's transfer counts every
// message of the peer, handshake messages included, so the pinging side
// has received 1372 bytes (response 92 + 10 replies of 128) and sent 1428
// (initiation 148 + 10 requests), or 1460 when a keepalive (32) went too.
func TestTransferCountsLikeTheKernel(t *testing.T) {
	p := newSamePair(t)
	p.b.run(t, "ping", "-c", "10", "-f", "-W", "1", p.a.v4)
	rxB, txB := transfer(t, p.b, p.a)
	if rxB != 1372 || (txB != 1428 && txB != 1460) {
		t.Errorf("pinging side: received %d, sent %d; the kernel's figures are 1372 and 1428 (or 1460)", rxB, txB)
	}
	rxA, txA := transfer(t, p.a, p.b)
	if txA != 1372 || (rxA != 1428 && rxA != 1460) {
		t.Errorf("pinged side: received %d, sent %d; the kernel's figures are 1428 (or 1460) and 1372", rxA, txA)
	}
}

// transfer returns what wg show s transfer reports for peer o.
func transfer(t *testing.T, s, o *side) (rx, tx int64) {
	t.Helper()
	for _, line := range strings.Split(s.wg(t, "show", s.ifname, "transfer"), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == o.pub() {
			rx, _ = strconv.ParseInt(f[1], 10, 64)
			tx, _ = strconv.ParseInt(f[2], 10, 64)
			return rx, tx
		}
	}
	t.Fatalf("wg show %s transfer has no line for the peer", s.ifname)
	return 0, 0
}
