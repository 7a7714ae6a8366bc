// Package client talks to the Wirelane service's API on its unix socket:
// the calls of /v1/ as methods, the event stream as an iterator. The CLI
// (`wirelane list`, `show`, `events`) and a tray use it; it holds no state
// beyond the HTTP connection pool.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
)

// Client is a connection pool to one service socket. It is safe for
// concurrent use.
type Client struct {
	hc *http.Client // requests (with a timeout)
	sc *http.Client // the event stream (no timeout)
}

// New returns a client of the service listening on socket ("" =
// service.DefaultSocket). Nothing is dialled until the first call.
func New(socket string) *Client {
	if socket == "" {
		socket = service.DefaultSocket
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{
		hc: &http.Client{Transport: tr, Timeout: 3 * time.Minute},
		sc: &http.Client{Transport: tr},
	}
}

// Error is an error answer of the service.
type Error struct {
	Status int    // the HTTP status
	Msg    string // the service's message
	Line   int    // the configuration line, 0 when none applies
}

// Error returns the service's message.
func (e *Error) Error() string { return e.Msg }

// base is the URL every request goes to (the host part is not used: the
// transport dials the socket).
const base = "http://wirelane"

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}

func decodeError(resp *http.Response) error {
	var e struct {
		Error string `json:"error"`
		Line  int    `json:"line"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("service answered %s", resp.Status)
	}
	return &Error{Status: resp.StatusCode, Msg: e.Error, Line: e.Line}
}

// List returns every tunnel.
func (c *Client) List(ctx context.Context) ([]service.Tunnel, error) {
	var ts []service.Tunnel
	return ts, c.do(ctx, http.MethodGet, "/v1/tunnels", nil, &ts)
}

// Get returns one tunnel.
func (c *Client) Get(ctx context.Context, name string) (service.Tunnel, error) {
	var t service.Tunnel
	return t, c.do(ctx, http.MethodGet, "/v1/tunnels/"+url.PathEscape(name), nil, &t)
}

// Up brings a tunnel up and returns it as it then is.
func (c *Client) Up(ctx context.Context, name string) (service.Tunnel, error) {
	var t service.Tunnel
	return t, c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/up", nil, &t)
}

// Down brings a tunnel down and returns it as it then is.
func (c *Client) Down(ctx context.Context, name string) (service.Tunnel, error) {
	var t service.Tunnel
	return t, c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/down", nil, &t)
}

// Import stores a configuration as a new, down tunnel (root only).
func (c *Client) Import(ctx context.Context, req service.ImportRequest) (service.Tunnel, error) {
	var t service.Tunnel
	return t, c.do(ctx, http.MethodPost, "/v1/tunnels", req, &t)
}

// Delete removes a stored tunnel that is down (root only).
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tunnels/"+url.PathEscape(name), nil, nil)
}

// Answer replies to a tunnel's auth event.
func (c *Client) Answer(ctx context.Context, name string, a service.AuthAnswer) error {
	return c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/auth", a, nil)
}

// Counters returns a tunnel's engine counters (what /metrics exports
// for it).
func (c *Client) Counters(ctx context.Context, name string) ([]service.Counter, error) {
	var cs []service.Counter
	return cs, c.do(ctx, http.MethodGet, "/v1/tunnels/"+url.PathEscape(name)+"/counters", nil, &cs)
}

// Metrics returns the Prometheus exposition text.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, decodeError(resp)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// Events is an open /v1/events stream.
type Events struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	ev   service.Event
	raw  []byte
	err  error
}

// Events opens the event stream: the snapshot's tunnel events come first.
// Close it (or cancel ctx) when done.
func (c *Client) Events(ctx context.Context) (*Events, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.sc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &Events{body: resp.Body, sc: sc}, nil
}

// Next reads the next event; false at the end of the stream (see Err).
func (e *Events) Next() bool {
	if e.err != nil || !e.sc.Scan() {
		return false
	}
	e.raw = e.sc.Bytes()
	e.ev = service.Event{}
	if err := json.Unmarshal(e.raw, &e.ev); err != nil {
		e.err = fmt.Errorf("event stream: %w", err)
		return false
	}
	return true
}

// Event returns the event Next read.
func (e *Events) Event() service.Event { return e.ev }

// Raw returns the JSON line of the event Next read (valid until the next
// call to Next).
func (e *Events) Raw() []byte { return e.raw }

// Err returns the error that ended the stream, nil for a clean end (the
// service stopped or dropped the client).
func (e *Events) Err() error {
	if e.err != nil {
		return e.err
	}
	return e.sc.Err()
}

// Close ends the stream.
func (e *Events) Close() error { return e.body.Close() }
