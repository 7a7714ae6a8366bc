package service

// Routes (docs/api.md has the bodies):
//
//	GET    /v1/tunnels               operator   the list
//	POST   /v1/tunnels               root       import a configuration
//	GET    /v1/tunnels/{name}        operator   one tunnel
//	DELETE /v1/tunnels/{name}        root       remove a stored, down tunnel
//	POST   /v1/tunnels/{name}/up     operator
//	POST   /v1/tunnels/{name}/down   operator
//	POST   /v1/tunnels/{name}/auth   operator   answer an auth event
//	POST   /v1/tunnels/{name}/reload operator   change a running tunnel in place (reload.go)
//	GET    /v1/events                operator   the event stream
//	GET    /metrics                  operator   Prometheus exposition
//
// Every answer is JSON (the stream: one JSON object per line; /metrics:
// the exposition format), every error {"error": "...", "line": N}.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"
)

// nameRE is what a tunnel name may be: an interface name as wg-quick
// accepts it.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_=+.-]{1,15}$`)

// ValidName reports whether name can name a tunnel. "." and ".." match the
// pattern but name no interface (Linux refuses them) and would make
// "...conf" files: they are refused.
func ValidName(name string) bool { return nameRE.MatchString(name) && name != "." && name != ".." }

// routes dispatches the API. It is the whole handler of the unix socket.
func (s *Server) routes(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/metrics":
		if s.method(w, r, roleOperator, http.MethodGet) {
			s.metrics.ServeHTTP(w, r)
		}
	case path == "/v1/events":
		if s.method(w, r, roleOperator, http.MethodGet) {
			s.events(w, r)
		}
	case path == "/v1/tunnels":
		switch r.Method {
		case http.MethodGet:
			if s.allow(w, r, roleOperator) {
				writeJSON(w, http.StatusOK, nonNil(s.host.List()))
			}
		case http.MethodPost:
			if s.allow(w, r, roleRoot) {
				s.importTunnel(w, r)
			}
		default:
			methodNotAllowed(w, http.MethodGet, http.MethodPost)
		}
	case strings.HasPrefix(path, "/v1/tunnels/"):
		rest := strings.TrimPrefix(path, "/v1/tunnels/")
		name, action, _ := strings.Cut(rest, "/")
		if !ValidName(name) || strings.Contains(action, "/") {
			writeError(w, http.StatusNotFound, apiError{Error: "no such tunnel or endpoint: " + clip(path)})
			return
		}
		switch action {
		case "":
			switch r.Method {
			case http.MethodGet:
				if s.allow(w, r, roleOperator) {
					s.getTunnel(w, name, http.StatusOK)
				}
			case http.MethodDelete:
				if s.allow(w, r, roleRoot) {
					s.deleteTunnel(w, r, name)
				}
			default:
				methodNotAllowed(w, http.MethodGet, http.MethodDelete)
			}
		case "up", "down":
			if s.method(w, r, roleOperator, http.MethodPost) {
				s.upDown(w, r, name, action == "up")
			}
		case "auth":
			if s.method(w, r, roleOperator, http.MethodPost) {
				s.answerAuth(w, r, name)
			}
		case "reload":
			if s.method(w, r, roleOperator, http.MethodPost) {
				s.reloadTunnel(w, r, name) // reload.go
			}
		case "counters":
			if s.method(w, r, roleOperator, http.MethodGet) {
				s.tunnelCounters(w, name) // counters_api.go
			}
		default:
			writeError(w, http.StatusNotFound, apiError{Error: "no such endpoint: " + clip(path)})
		}
	default:
		writeError(w, http.StatusNotFound, apiError{Error: "no such endpoint: " + clip(path) + " (the API is under /v1/)"})
	}
}

// method checks the method (one allowed) and then the role.
func (s *Server) method(w http.ResponseWriter, r *http.Request, need role, m string) bool {
	if r.Method != m {
		methodNotAllowed(w, m)
		return false
	}
	return s.allow(w, r, need)
}

// allow answers 403 unless the caller's role is at least need.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, need role) bool {
	c := callerOf(r.Context())
	if c.role >= need {
		return true
	}
	writeError(w, http.StatusForbidden, apiError{Error: s.refusal(c, need)})
	return false
}

func methodNotAllowed(w http.ResponseWriter, allowed ...string) {
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, http.StatusMethodNotAllowed, apiError{Error: "method not allowed (allowed: " + strings.Join(allowed, ", ") + ")"})
}

func (s *Server) getTunnel(w http.ResponseWriter, name string, status int) {
	t, ok := s.host.Get(name)
	if !ok {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no tunnel named %q", name)})
		return
	}
	writeJSON(w, status, nonNilTunnel(t))
}

// hostContext is the context of a Host call made for a request: not
// cancelled when the client hangs up (a bring-up must not be abandoned
// half-way because a tray closed its connection), bounded by
// cfg.OpTimeout.
func (s *Server) hostContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.OpTimeout)
}

func (s *Server) upDown(w http.ResponseWriter, r *http.Request, name string, up bool) {
	ctx, cancel := s.hostContext(r)
	defer cancel()
	op, verb := s.host.Down, "down"
	if up {
		op, verb = s.host.Up, "up"
	}
	c := callerOf(r.Context())
	s.log.Info("tunnel "+verb+" requested", "tunnel", name, "uid", c.uid)
	if err := op(ctx, name); err != nil {
		s.hostError(w, err)
		return
	}
	s.getTunnel(w, name, http.StatusOK)
}

func (s *Server) importTunnel(w http.ResponseWriter, r *http.Request) {
	var req ImportRequest
	if !s.readJSON(w, r, &req) {
		return
	}
	switch {
	case !ValidName(req.Name):
		writeError(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("invalid tunnel name %q: 1 to 15 characters of a-z, A-Z, 0-9, _=+.-", clip(req.Name))})
		return
	case !req.Kind.Valid():
		writeError(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("invalid kind %q: want wireguard, gateway, openvpn-client or openvpn-server", clip(string(req.Kind)))})
		return
	case strings.TrimSpace(req.Config) == "":
		writeError(w, http.StatusBadRequest, apiError{Error: "config is empty"})
		return
	}
	ctx, cancel := s.hostContext(r)
	defer cancel()
	if err := s.host.Import(ctx, req); err != nil {
		s.hostError(w, err)
		return
	}
	s.log.Info("tunnel imported", "tunnel", req.Name, "kind", req.Kind)
	w.Header().Set("Location", "/v1/tunnels/"+req.Name)
	s.getTunnel(w, req.Name, http.StatusCreated)
}

func (s *Server) deleteTunnel(w http.ResponseWriter, r *http.Request, name string) {
	ctx, cancel := s.hostContext(r)
	defer cancel()
	if err := s.host.Delete(ctx, name); err != nil {
		s.hostError(w, err)
		return
	}
	s.log.Info("tunnel deleted", "tunnel", name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) answerAuth(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := s.host.(Authenticator)
	if !ok {
		writeError(w, http.StatusNotImplemented, apiError{Error: "this service's tunnels never ask for credentials"})
		return
	}
	var ans AuthAnswer
	if !s.readJSON(w, r, &ans) {
		return
	}
	ctx, cancel := s.hostContext(r)
	defer cancel()
	if err := a.Answer(ctx, name, ans); err != nil {
		s.hostError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// hostError answers a Host's error with its status.
func (s *Server) hostError(w http.ResponseWriter, err error) {
	code, body := statusOf(err)
	if code == http.StatusInternalServerError {
		s.log.Warn("host operation failed", "err", err)
	}
	writeError(w, code, body)
}

// readJSON decodes one JSON object of at most cfg.MaxBody bytes into v,
// answering 413 or 400 itself when it cannot.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("more than one JSON value in the body")
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
	case errors.As(err, &syn):
		writeError(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)})
	case errors.As(err, &typ):
		writeError(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("malformed request: field %q must be a %s", typ.Field, typ.Type)})
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, apiError{Error: "empty request body: a JSON object is expected"})
	default:
		writeError(w, http.StatusBadRequest, apiError{Error: "malformed request: " + clip(err.Error())})
	}
	return false
}

// streamSocketBuffer is the send buffer of an event stream's socket.
const streamSocketBuffer = 32 << 10

// events streams /v1/events: the snapshot, then live events, one JSON
// object per line, until the client goes away, falls behind or the service
// stops.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	sub, err := s.hub.subscribe(func() []Event {
		now := time.Now().UTC()
		var evs []Event
		for _, t := range s.host.List() {
			t := nonNilTunnel(t)
			evs = append(evs, Event{Type: EventTunnel, Time: now, Tunnel: t.Name, State: t.State, Error: t.Error, Initial: true, Status: &t})
		}
		return evs
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	slow := false
	defer func() { s.hub.unsubscribe(sub, slow) }()
	// A small kernel buffer bounds what a subscriber that stops reading
	// holds in the kernel, and makes it fall behind (and be dropped)
	// sooner; events are small, so a reading client never notices.
	if uc, ok := r.Context().Value(connKey{}).(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(streamSocketBuffer)
	}
	// The request is read: lift the read deadline, or the server's
	// background read would time out and cancel the stream.
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Connection", "close") // a stream that ends ends its connection
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for {
		var e Event
		var ok bool
		select {
		case e, ok = <-sub.ch:
		case <-r.Context().Done():
			return
		}
		if !ok {
			if s.hub.wasSlow(sub) {
				s.log.Info("event subscriber dropped: it did not read its events", "uid", callerOf(r.Context()).uid)
			}
			return
		}
		// A client that stops reading blocks this write, not the hub: the
		// hub drops it once its queue is full, and the deadline ends the
		// write.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		err := enc.Encode(&e)
		if err == nil && len(sub.ch) == 0 {
			err = rc.Flush()
		}
		if err != nil {
			if slow = errors.Is(err, os.ErrDeadlineExceeded); slow {
				s.log.Info("event subscriber dropped: it did not read for "+s.cfg.StreamWriteTimeout.String(), "uid", callerOf(r.Context()).uid)
			}
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"the answer could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, e)
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil(ts []Tunnel) []Tunnel {
	if ts == nil {
		return []Tunnel{}
	}
	for i := range ts {
		ts[i] = nonNilTunnel(ts[i])
	}
	return ts
}

// nonNilTunnel gives a tunnel empty (not null) addresses and peers, and
// handshake times in whole UTC seconds.
func nonNilTunnel(t Tunnel) Tunnel {
	if t.Addresses == nil {
		t.Addresses = []netip.Prefix{}
	}
	peers := make([]Peer, len(t.Peers))
	for i, p := range t.Peers {
		peers[i] = normPeer(p)
	}
	t.Peers = peers
	return t
}

// normPeer gives a peer its handshake time in whole UTC seconds (none for
// a zero time) and its own copy of the allowed IPs.
func normPeer(p Peer) Peer {
	if p.LatestHandshake != nil {
		if p.LatestHandshake.IsZero() {
			p.LatestHandshake = nil
		} else {
			h := p.LatestHandshake.UTC().Truncate(time.Second)
			p.LatestHandshake = &h
		}
	}
	p.AllowedIPs = append(p.AllowedIPs[:0:0], p.AllowedIPs...)
	return p
}

// clip shortens text echoed in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
