package uapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
)

// ask sends one request to Serve over a pipe and returns its answer, up to
// and with the blank line after errno.
func ask(t *testing.T, h uapi.Handler, in string) (string, error) {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	go uapi.Serve(s, h)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, in)
	br := bufio.NewReader(c)
	var out strings.Builder
	errno := false
	for {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			return out.String(), err
		}
		if errno && line == "\n" {
			return out.String(), nil
		}
		errno = errno || strings.HasPrefix(line, "errno=")
	}
}

// TestGetWithCounters: get=1 with uapi.CountersRequest answers the device keys,
// then the wirelane_ counters, then the peers; a plain get=1 has none
// (byte for byte the reference's answer); any other line after get=1 is
// still errno=-22.
func TestGetWithCounters(t *testing.T) {
	d, _, _ := newSolo(t)
	k := mustKey(t)
	must(t, d.Configure(&device.Config{PrivateKey: &k, Peers: []device.PeerConfig{{PublicKey: mustKey(t)}}}))

	out, err := ask(t, d, "get=1\n"+uapi.CountersRequest+"\n\n")
	if err != nil {
		t.Fatal(err)
	}
	iPriv, iCtr, iPeer := strings.Index(out, "private_key="), strings.Index(out, "\nwirelane_handshake_initiations_sent=0\n"), strings.Index(out, "public_key=")
	if iPriv < 0 || iCtr < iPriv || iPeer < iCtr || !strings.HasSuffix(out, "errno=0\n\n") {
		t.Errorf("answer with counters:\n%s", out)
	}
	for _, key := range []string{"wirelane_dropped_replay=", "wirelane_handshakes_rejected_mac1=", "wirelane_route_publications=", "wirelane_socket_send_errors="} {
		if !strings.Contains(out, "\n"+key) {
			t.Errorf("no %s in:\n%s", key, out)
		}
	}

	plain, err := ask(t, d, "get=1\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, uapi.CounterPrefix) || !strings.HasSuffix(plain, "errno=0\n\n") {
		t.Errorf("plain get=1:\n%s", plain)
	}

	for _, in := range []string{"get=1\nwirelane_counters=2\n\n", "get=1\nfoo=1\n" + uapi.CountersRequest + "\n\n", "get=1\n" + uapi.CountersRequest + "\nfoo=1\n\n"} {
		out, err := ask(t, d, in)
		if err != nil || out != "errno=-22\n\n" {
			t.Errorf("%q: %q, %v; want errno=-22", in, out, err)
		}
	}
}

// TestCountersMemory: a real device's answer with counters carries the
// process's live heap and goroutine stacks, non-zero and plausible, and
// the live heap grows when 1,000 peers are added in one UAPI set (the
// test forces collections in its own process, which the daemon never
// does; the collection count moves with them).
func TestCountersMemory(t *testing.T) {
	d, _, _ := newSolo(t)
	k := mustKey(t)
	must(t, d.Configure(&device.Config{PrivateKey: &k}))
	read := func() map[string]uint64 {
		runtime.GC()
		out, err := ask(t, d, "get=1\n"+uapi.CountersRequest+"\n\n")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, uapi.CounterPrefix+"engine_go_") {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				m[strings.TrimPrefix(k, uapi.CounterPrefix)] = n
			}
		}
		return m
	}
	before := read()
	heap0, stacks0 := before["engine_go_heap_live_bytes"], before["engine_go_stack_bytes"]
	if heap0 < 64<<10 || heap0 > 4<<30 || stacks0 < 8<<10 || stacks0 > 1<<30 || before["engine_go_gc_cycles"] == 0 {
		t.Fatalf("with no peer: %v", before)
	}
	var set strings.Builder
	set.WriteString("set=1\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&set, "public_key=%s\nendpoint=192.0.2.%d:%d\nallowed_ip=10.%d.%d.1/32\n", hexKey(mustKey(t).PublicKey()), 1+i%250, 20000+i, 64+i/256, i%256)
	}
	set.WriteString("\n")
	if out, err := ask(t, d, set.String()); err != nil || out != "errno=0\n\n" {
		t.Fatalf("set of 1000 peers: %q, %v", out, err)
	}
	after := read()
	heap1, stacks1 := after["engine_go_heap_live_bytes"], after["engine_go_stack_bytes"]
	// A peer keeps well over 1 KB (docs/benchmarks.md: some 4.6 KB of
	// heap); the floor is far below that, to catch a gauge that does not
	// move, not to measure.
	if heap1 < heap0+1000*512 || after["engine_go_gc_cycles"] <= before["engine_go_gc_cycles"] {
		t.Errorf("1000 peers: heap %d -> %d, stacks %d -> %d, gc cycles %d -> %d", heap0, heap1, stacks0, stacks1, before["engine_go_gc_cycles"], after["engine_go_gc_cycles"])
	}
	t.Logf("1000 peers: live heap %d -> %d (%.1f KB per peer), stacks %d -> %d", heap0, heap1, float64(heap1-heap0)/1000/1024, stacks0, stacks1)
}
