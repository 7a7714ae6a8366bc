package uapi_test

import (
	"bufio"
	"io"
	"net"
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
