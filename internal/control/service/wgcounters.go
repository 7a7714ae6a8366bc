package service

// The WireGuard engine's own counters, read from a daemon out of process:
//
//	"get=1\nwirelane_counters=1\n\n" -> the usual answer plus
//	wirelane_KEY=N lines (device.Counters.Each) -> wgCounterMetrics -> EngineCounter
//
// A daemon that does not know the request (wireguard-go, an older
// wirelaned) answers errno=-22: it then has no engine counters, and its
// tunnel is shown from the plain get=1 as before.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
)

// The help texts of the engine counters, one per metric name (a name must
// keep one help text across tunnels and kinds).
const (
	helpWGInitiations = "WireGuard handshake initiations sent (first attempts and retries)."
	helpWGCompleted   = "WireGuard handshakes completed, by this side's role (initiator: a valid response; responder: a valid initiation answered)."
	helpWGRejected    = "WireGuard handshake messages rejected, by reason (mac1, cookie: answered with a cookie reply under load, rate_limit, invalid, stale)."
	helpWGCookiesSent = "WireGuard cookie replies sent under load."
	helpWGCookiesRecv = "WireGuard cookie replies accepted from peers."
	helpWGDropped     = "Packets the WireGuard engine dropped, by reason."
	helpWGRoutes      = "Routes published to the WireGuard engine's lock-free send path (an endpoint learnt or roamed, a sticky source cleared)."
	helpSocketErrors  = "Failed socket calls, by operation (send: a batch or a packet; receive: one call; OpenVPN counts send only)."
	helpTUNErrors     = "Failed calls on the tunnel's TUN device: writes the kernel refused (a batch each) and, for OpenVPN, reads that dropped a packet."
	// The engine's plan (internal/sys/procs), gauges.
	helpGOMAXPROCS    = "Threads running Go code at once in the process that carries the tunnel's packets (GOMAXPROCS)."
	helpCryptoWorkers = "Crypto workers the WireGuard device started."
	helpInlineCrypto  = "Largest batch the WireGuard device seals or opens without its crypto workers, in packets."
	// The daemon process's memory (runtime/metrics).
	helpGoHeapLive = "Go heap found live by the last garbage collection in the process that carries the tunnel, in bytes."
	helpGoStacks   = "Goroutine stacks of the process that carries the tunnel, in bytes."
	helpGoroutines = "Goroutines alive in the process that carries the tunnel."
	helpGCCycles   = "Garbage collections done by the process that carries the tunnel."
)

// wgCounterMetric says which metric and label a counter key becomes.
type wgCounterMetric struct {
	name, help string
	label      [2]string // {"", ""} when none
}

// wgCounterOf maps a device.Counters.Each key to its metric, or false for a
// key this service does not know (a newer daemon's: skipped).
func wgCounterOf(key string) (wgCounterMetric, bool) {
	switch key {
	case "handshake_initiations_sent":
		return wgCounterMetric{"wireguard_handshake_initiations_total", helpWGInitiations, [2]string{}}, true
	case "handshakes_completed_initiator":
		return wgCounterMetric{"wireguard_handshakes_completed_total", helpWGCompleted, [2]string{"role", "initiator"}}, true
	case "handshakes_completed_responder":
		return wgCounterMetric{"wireguard_handshakes_completed_total", helpWGCompleted, [2]string{"role", "responder"}}, true
	case "cookie_replies_sent":
		return wgCounterMetric{"wireguard_cookie_replies_sent_total", helpWGCookiesSent, [2]string{}}, true
	case "cookie_replies_received":
		return wgCounterMetric{"wireguard_cookie_replies_received_total", helpWGCookiesRecv, [2]string{}}, true
	case "route_publications":
		return wgCounterMetric{"wireguard_route_publications_total", helpWGRoutes, [2]string{}}, true
	case "socket_send_errors":
		return wgCounterMetric{"socket_errors_total", helpSocketErrors, [2]string{"op", "send"}}, true
	case "socket_receive_errors":
		return wgCounterMetric{"socket_errors_total", helpSocketErrors, [2]string{"op", "receive"}}, true
	case "tun_write_errors":
		return wgCounterMetric{"tun_errors_total", helpTUNErrors, [2]string{}}, true
	case "engine_gomaxprocs":
		return wgCounterMetric{"engine_gomaxprocs", helpGOMAXPROCS, [2]string{}}, true
	case "engine_crypto_workers":
		return wgCounterMetric{"engine_crypto_workers", helpCryptoWorkers, [2]string{}}, true
	case "engine_inline_crypto_batch":
		return wgCounterMetric{"engine_inline_crypto_batch", helpInlineCrypto, [2]string{}}, true
	case "engine_go_heap_live_bytes":
		return wgCounterMetric{"engine_go_heap_live_bytes", helpGoHeapLive, [2]string{}}, true
	case "engine_go_stack_bytes":
		return wgCounterMetric{"engine_go_stack_bytes", helpGoStacks, [2]string{}}, true
	case "engine_go_goroutines":
		return wgCounterMetric{"engine_go_goroutines", helpGoroutines, [2]string{}}, true
	case "engine_go_gc_cycles":
		return wgCounterMetric{"engine_go_gc_cycles_total", helpGCCycles, [2]string{}}, true
	}
	if r, ok := strings.CutPrefix(key, "handshakes_rejected_"); ok && labelValueOK(r) {
		return wgCounterMetric{"wireguard_handshakes_rejected_total", helpWGRejected, [2]string{"reason", r}}, true
	}
	if r, ok := strings.CutPrefix(key, "dropped_"); ok && labelValueOK(r) {
		return wgCounterMetric{"wireguard_dropped_packets_total", helpWGDropped, [2]string{"reason", r}}, true
	}
	return wgCounterMetric{}, false
}

// labelValueOK accepts the reasons a daemon may name: [a-z0-9_], 1 to 32.
func labelValueOK(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// maxCounterLines bounds how many counter lines one answer may carry.
const maxCounterLines = 256

// parseCounters reads a get=1 answer (with the counters asked for) up to
// its blank line and returns its wirelane_ counters as EngineCounters of
// tunnel. errno=-22 (the daemon does not know the request) gives none and
// no error.
func parseCounters(r io.Reader, tunnel string) ([]EngineCounter, error) {
	br := bufio.NewReaderSize(r, 4096)
	var out []EngineCounter
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, fmt.Errorf("uapi answer line %d is too long", lineNo)
		}
		if err != nil {
			return nil, fmt.Errorf("uapi answer ended before its errno: %w", err)
		}
		line = line[:len(line)-1]
		// Only errno and the counters become strings: the other lines
		// (a private key among them) are looked at in place.
		if !bytes.HasPrefix(line, []byte("errno=")) && !bytes.HasPrefix(line, []byte(uapi.CounterPrefix)) {
			if bytes.IndexByte(line, '=') < 0 {
				return nil, fmt.Errorf("uapi answer line %d has no '='", lineNo)
			}
			continue
		}
		k, v, _ := strings.Cut(string(line), "=")
		if k == "errno" {
			switch v {
			case "0":
				return out, nil
			case "-22":
				return nil, nil
			}
			return nil, fmt.Errorf("the daemon answered errno %s", v)
		}
		key, ok := strings.CutPrefix(k, uapi.CounterPrefix)
		if !ok {
			continue
		}
		m, known := wgCounterOf(key)
		if !known {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("uapi answer line %d: invalid %s", lineNo, k)
		}
		if len(out) == maxCounterLines {
			return nil, fmt.Errorf("uapi answer line %d: more than %d counters", lineNo, maxCounterLines)
		}
		ec := EngineCounter{Tunnel: tunnel, Name: m.name, Help: m.help, Value: float64(n)}
		if m.label[0] != "" {
			ec.Labels = [][2]string{m.label}
		}
		out = append(out, ec)
	}
}

// Counters returns the engine counters of the daemon of interface iface,
// labelled with tunnel; none when it does not answer or does not count.
func (h *UAPIHost) Counters(iface, tunnel string) []EngineCounter {
	if !ValidName(iface) {
		return nil
	}
	c, err := net.DialTimeout("unix", filepath.Join(h.dir, iface+".sock"), h.timeout)
	if err != nil {
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(h.timeout))
	if _, err := io.WriteString(c, "get=1\n"+uapi.CountersRequest+"\n\n"); err != nil {
		return nil
	}
	out, err := parseCounters(io.LimitReader(c, maxGetAnswer), tunnel)
	if err != nil {
		return nil
	}
	return out
}

// EngineCounters returns the counters of every daemon that answers (the
// CounterSource of the read-only host).
func (h *UAPIHost) EngineCounters() []EngineCounter {
	var out []EngineCounter
	for _, n := range h.names() {
		out = append(out, h.Counters(n, n)...)
	}
	return out
}

var _ CounterSource = (*UAPIHost)(nil)
