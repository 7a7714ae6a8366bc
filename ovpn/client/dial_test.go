package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
)

// eventLog collects Dial's events.
type eventLog struct {
	mu sync.Mutex // guards evs
	ev []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.ev...)
}

// closedTCPPort returns a loopback TCP port nothing listens on.
func closedTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

func shortRetries(t *testing.T) {
	old := retryUnit
	retryUnit = time.Millisecond
	t.Cleanup(func() { retryUnit = old })
}

// With Retry, Dial tries the remotes in turn, pauses connect-retry after
// each round, doubles the pause after the fifth, and stops when its
// context ends; every failure is reported as it happens.
func TestDialRetriesRemotesInTurnAndBacksOff(t *testing.T) {
	shortRetries(t)
	p1, p2 := closedTCPPort(t), closedTCPPort(t)
	cfg := testConfig(t, fmt.Sprintf("remote 127.0.0.1 %d tcp\nremote 127.0.0.1 %d tcp\n", p1, p2))
	cfg.Remotes = cfg.Remotes[1:] // testConfig's own UDP remote
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log eventLog
	opts := Options{Retry: true, OnEvent: func(e Event) {
		log.add(e)
		if e.State == StateReconnect && e.Attempt == 7 {
			cancel()
		}
	}}
	if _, err := Dial(ctx, cfg, opts); err == nil {
		t.Fatal("a session with no server")
	}
	var waits, order []string
	for _, e := range log.events() {
		switch {
		case e.State == StateReconnect:
			waits = append(waits, strings.Fields(strings.TrimPrefix(e.Detail, "every remote failed; trying again in "))[0])
		case e.State == StateTCPConnect && e.Err == nil && e.Attempt == 1:
			order = append(order, e.Addr.String())
		case e.State == StateTCPConnect && e.Err != nil && !strings.Contains(e.Err.Error(), "refused"):
			t.Errorf("failure %v", e.Err)
		}
	}
	if got, want := strings.Join(waits, " "), "1ms 1ms 1ms 1ms 1ms 2ms 4ms"; got != want {
		t.Errorf("pauses %s, want %s", got, want)
	}
	if got, want := strings.Join(order, " "), fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d", p1, p2); got != want {
		t.Errorf("first round dialled %s, want %s", got, want)
	}
}

// connect-retry-max stops Dial after that many rounds with ErrGaveUp.
func TestDialConnectRetryMax(t *testing.T) {
	shortRetries(t)
	cfg := testConfig(t, fmt.Sprintf("remote 127.0.0.1 %d tcp\nconnect-retry-max 3\n", closedTCPPort(t)))
	cfg.Remotes = cfg.Remotes[1:]
	var log eventLog
	_, err := Dial(context.Background(), cfg, Options{Retry: true, OnEvent: log.add})
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), "connect-retry-max 3") {
		t.Fatalf("err %v", err)
	}
	n := 0
	for _, e := range log.events() {
		if e.State == StateTCPConnect && e.Err != nil {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

// A name that does not resolve is reported at once and the next remote
// is tried; when nothing resolves, resolv-retry bounds the retries.
func TestDialResolveFailures(t *testing.T) {
	shortRetries(t)
	lookups := 0
	var mu sync.Mutex
	lookup := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		mu.Lock()
		lookups++
		mu.Unlock()
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	cfg := testConfig(t, "remote nosuch.invalid 1194 udp\nresolv-retry 1\nconnect-retry 50\n")
	cfg.Remotes = cfg.Remotes[1:]
	var log eventLog
	start := time.Now()
	_, err := Dial(context.Background(), cfg, Options{Retry: true, Lookup: lookup, OnEvent: log.add})
	took := time.Since(start)
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), "resolv-retry 1") || !strings.Contains(err.Error(), "nosuch.invalid: no such host") {
		t.Fatalf("err %v", err)
	}
	if lookups < 2 || took > 5*time.Second {
		t.Fatalf("%d lookups in %v", lookups, took)
	}
	evs := log.events()
	if e := evs[len(evs)-1]; e.State != StateExiting || e.Err == nil {
		t.Fatalf("last event %+v", e)
	}
	// resolv-retry 0 (and no Retry at all): one lookup per remote.
	lookups = 0
	cfg.ResolvRetry = 0
	if _, err := Dial(context.Background(), cfg, Options{Retry: true, Lookup: lookup}); !errors.Is(err, ErrGaveUp) || lookups != 1 {
		t.Fatalf("resolv-retry 0: %v after %d lookups", err, lookups)
	}
}

// The emitter delivers in order and nothing after stop.
func TestEmitterStops(t *testing.T) {
	var log eventLog
	e := newEmitter(log.add)
	e.at(config.Remote{Host: "vpn.example", Port: 1194, Proto: config.UDP}, netip.MustParseAddrPort("192.0.2.1:1194"), 2)
	e.emit(StateWait, "waiting", nil)
	e.stop()
	e.emit(StateAuth, "late", nil)
	evs := log.events()
	if len(evs) != 1 || evs[0].Remote != "vpn.example:1194" || evs[0].Addr.String() != "192.0.2.1:1194" || evs[0].Attempt != 2 || evs[0].Proto != config.UDP {
		t.Fatalf("%+v", evs)
	}
	var nilEmitter *emitter
	nilEmitter.emit(StateWait, "x", nil) // no callback: nothing
}

func TestPushSummary(t *testing.T) {
	r, err := control.ParsePushOptions([]string{"ifconfig 10.8.0.2 255.255.255.0", "route-gateway 10.8.0.1", "topology subnet",
		"route 10.98.0.0 255.255.255.0", "route 10.99.0.0 255.255.255.0", "redirect-gateway def1", "dhcp-option DNS 10.8.0.1",
		"cipher AES-256-GCM", "peer-id 3"})
	if err != nil {
		t.Fatal(err)
	}
	want := "address 10.8.0.2/24, gateway 10.8.0.1, 2 routes, redirect-gateway def1, DNS 10.8.0.1, cipher AES-256-GCM, peer-id 3"
	if got := pushSummary(r); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestStaticChallengePassword(t *testing.T) {
	if got := staticChallengePassword("secret", "123456"); got != "SCRV1:c2VjcmV0:MTIzNDU2" {
		t.Fatal(got)
	}
}

// server-poll-timeout ends an attempt that gets no reply long before
// hand-window would.
func TestDialServerPollTimeout(t *testing.T) {
	cfg := testConfig(t, "server-poll-timeout 1\n") // UDP port 9 of loopback: no reply
	start := time.Now()
	_, err := Dial(context.Background(), cfg, Options{})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "server-poll-timeout 1s") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// A configuration whose auth-user-pass gives the username only is not
// dialled with an empty password: Dial wants the caller to have asked
// for it (#18).
func TestDialWantsTheAskedPassword(t *testing.T) {
	cfg := &config.Config{AuthUserPass: true, Username: "bob",
		Remotes: []config.Remote{{Host: "127.0.0.1", Port: uint16(closedTCPPort(t)), Proto: config.TCP}}}
	_, err := Dial(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), `gives the username "bob" without its password`) {
		t.Fatalf("Dial: %v", err)
	}
}
