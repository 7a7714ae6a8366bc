package service

import (
	"strings"
	"testing"
)

const countersAnswer = "private_key=" + "a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8a8" + "\nlisten_port=51820\n" +
	"wirelane_handshake_initiations_sent=3\nwirelane_handshakes_completed_initiator=2\nwirelane_handshakes_completed_responder=1\n" +
	"wirelane_handshakes_rejected_mac1=7\nwirelane_cookie_replies_sent=4\nwirelane_dropped_replay=9\nwirelane_route_publications=5\n" +
	"wirelane_socket_send_errors=1\nwirelane_socket_receive_errors=0\nwirelane_tun_write_errors=6\nwirelane_from_the_future=8\n" +
	"wirelane_engine_gomaxprocs=7\nwirelane_engine_crypto_workers=7\nwirelane_engine_inline_crypto_batch=3\n" +
	"wirelane_engine_go_heap_live_bytes=4194304\nwirelane_engine_go_stack_bytes=393216\nwirelane_engine_go_gc_cycles=12\nwirelane_engine_go_goroutines=42\n" +
	"public_key=b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1\nprotocol_version=1\nerrno=0\n\n"

// TestParseCounters: the wirelane_ keys become the engine counters with
// their labels; a key this service does not know is skipped; errno=-22
// (a daemon without counters) is none and no error; broken answers are
// errors.
func TestParseCounters(t *testing.T) {
	got, err := parseCounters(strings.NewReader(countersAnswer), "wg0")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, ec := range got {
		k := ec.Name
		for _, l := range ec.Labels {
			k += "{" + l[0] + "=" + l[1] + "}"
		}
		if ec.Tunnel != "wg0" || ec.Help == "" {
			t.Errorf("%+v", ec)
		}
		have[k] = ec.Value
	}
	want := map[string]float64{
		"wireguard_handshake_initiations_total":                3,
		"wireguard_handshakes_completed_total{role=initiator}": 2,
		"wireguard_handshakes_completed_total{role=responder}": 1,
		"wireguard_handshakes_rejected_total{reason=mac1}":     7,
		"wireguard_cookie_replies_sent_total":                  4,
		"wireguard_dropped_packets_total{reason=replay}":       9,
		"wireguard_route_publications_total":                   5,
		"socket_errors_total{op=send}":                         1,
		"socket_errors_total{op=receive}":                      0,
		"tun_errors_total":                                     6,
		"engine_gomaxprocs":                                    7,
		"engine_crypto_workers":                                7,
		"engine_inline_crypto_batch":                           3,
		"engine_go_heap_live_bytes":                            4194304,
		"engine_go_stack_bytes":                                393216,
		"engine_go_gc_cycles_total":                            12,
		"engine_go_goroutines":                                 42,
	}
	if len(have) != len(want) {
		t.Errorf("got %v\nwant %v", have, want)
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("%s = %v, want %v", k, have[k], v)
		}
	}
	if got, err := parseCounters(strings.NewReader("errno=-22\n\n"), "wg0"); err != nil || got != nil {
		t.Errorf("errno=-22: %v, %v", got, err)
	}
	for _, bad := range []string{"", "wirelane_dropped_replay=x\nerrno=0\n\n", "no equals\nerrno=0\n\n", "errno=-5\n\n", "wirelane_tun_write_errors=1\n"} {
		if _, err := parseCounters(strings.NewReader(bad), "wg0"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParseCounters: any answer gives counters with valid names and
// labels, or an error; never a panic.
func FuzzParseCounters(f *testing.F) {
	f.Add(countersAnswer)
	f.Add("errno=-22\n\n")
	f.Add("wirelane_dropped_=1\nwirelane_handshakes_rejected_ZZ=2\nerrno=0\n\n")
	f.Add("wirelane_dropped_replay=18446744073709551616\nerrno=0\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseCounters(strings.NewReader(in), "t")
		if err != nil {
			return
		}
		for _, ec := range got {
			if engineMetric(ec) == nil {
				t.Fatalf("an invalid metric from %q: %+v", in, ec)
			}
		}
	})
}
