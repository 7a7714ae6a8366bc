package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testService runs a Server for h on a socket in a fresh directory.
// asRole, when not negative, replaces the SO_PEERCRED decision (the test
// runs as one user; TestPermissionsRealUsers checks the real one).
type testService struct {
	t      *testing.T
	s      *Server
	socket string
	hc     *http.Client
}

func startService(t *testing.T, h Host, cfg Config, asRole role) *testService {
	t.Helper()
	dir, err := os.MkdirTemp("", "wirelane-svc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "run", "wirelane.sock")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	s := New(h, cfg)
	if asRole >= 0 {
		s.roleOf = func(uint32, uint32, string) role { return asRole }
	}
	l, err := Listen(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return &testService{t: t, s: s, socket: cfg.Socket, hc: unixClient(cfg.Socket)}
}

func unixClient(socket string) *http.Client {
	return &http.Client{
		Timeout: 20 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
}

// do sends a request and returns the status, the body and the headers.
func (ts *testService) do(method, path, body string) (int, []byte, http.Header) {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://wirelane"+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, b, resp.Header
}

// stream is an open /v1/events stream read line by line.
type stream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
	evs  chan Event
}

func (ts *testService) events() *stream {
	ts.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://wirelane/v1/events", nil)
	hc := unixClient(ts.socket)
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("GET /v1/events: %s", resp.Status)
	}
	st := &stream{t: ts.t, resp: resp, sc: bufio.NewScanner(resp.Body), evs: make(chan Event, 1024)}
	st.sc.Buffer(nil, 1<<20)
	go func() {
		defer close(st.evs)
		for st.sc.Scan() {
			var e Event
			if err := json.Unmarshal(st.sc.Bytes(), &e); err != nil {
				ts.t.Errorf("event is not JSON: %v: %s", err, clip(st.sc.Text()))
				return
			}
			st.evs <- e
		}
	}()
	ts.t.Cleanup(func() { resp.Body.Close() })
	return st
}

// next returns the next event, failing the test after 5 s.
func (st *stream) next() (Event, bool) {
	st.t.Helper()
	select {
	case e, ok := <-st.evs:
		return e, ok
	case <-time.After(5 * time.Second):
		st.t.Fatal("no event within 5 s")
		return Event{}, false
	}
}

// nextOf skips events of other types (transfer and peer events come on
// their own schedule) and returns the next one of type typ.
func (st *stream) nextOf(typ string) Event {
	st.t.Helper()
	for {
		e, ok := st.next()
		if !ok {
			st.t.Fatalf("stream ended while waiting for a %s event", typ)
		}
		if e.Type == typ {
			return e
		}
	}
}

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}
