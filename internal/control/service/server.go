package service

// The service's life: New (the handlers, the hub, the registry) -> Serve on
// the unix socket (and ServeMetrics on a TCP address, when configured) ->
// the Host publishes through the hub from Watch on -> Shutdown publishes
// stopping, ends every event stream, then closes the listeners and waits
// for requests in flight.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config tunes a Server. The zero value gives the defaults.
type Config struct {
	// Socket is the API socket's path (Run; default DefaultSocket).
	Socket string
	// Group is the group whose members may list, watch, read metrics and
	// bring tunnels up and down (default "wirelane").
	Group string
	// MetricsAddr, when set, is a TCP address ("127.0.0.1:9586") where
	// /metrics is also served (Run), to anyone who can connect.
	MetricsAddr string
	// Logger receives the service's logs (default: discarded).
	Logger *slog.Logger
	// QueueLen is how many events a subscriber may fall behind before it
	// is dropped (default 256).
	QueueLen int
	// MaxBody bounds a request body (default 1 MiB).
	MaxBody int64
	// MaxConns bounds the connections served at once on each listener
	// (default 1024).
	MaxConns int
	// PollInterval is how often the Host is read for peer and transfer
	// events (default 1 s).
	PollInterval time.Duration
	// OpTimeout bounds one Host operation of a request (default 2 min).
	OpTimeout time.Duration
	// HeaderTimeout bounds the reading of a request's headers (default
	// 5 s): a client that dribbles them (slowloris) is disconnected.
	HeaderTimeout time.Duration
	// RequestTimeout bounds the reading of a whole request, body included
	// (default 30 s; the event stream lifts it once its request is read).
	RequestTimeout time.Duration
	// StreamWriteTimeout bounds one write of the event stream (default
	// 10 s): a client that does not read for that long is disconnected.
	StreamWriteTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.Group == "" {
		c.Group = "wirelane"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 256
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 1 << 20
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 2 * time.Minute
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = 10 * time.Second
	}
}

// Server is the service's API in front of a Host.
type Server struct {
	cfg     Config // defaults applied; immutable
	host    Host
	log     *slog.Logger
	hub     *hub
	metrics http.Handler // promhttp over the registry

	// roleOf decides a connection's role from its credentials (roleFor,
	// replaced by tests that cannot switch users).
	roleOf func(uid, gid uint32, group string) role

	ctx     context.Context // cancelled by Shutdown; stops the poller
	cancel  context.CancelFunc
	stopHub func() // the Host's Watch stop function

	mu       sync.Mutex
	servers  []*http.Server // guarded by mu
	shutdown bool           // guarded by mu
}

// New returns a Server for h and starts watching it (h.Watch is called
// here). Serve, ServeMetrics or Run then serve it.
func New(h Host, cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, host: h, log: cfg.Logger, hub: newHub(cfg.QueueLen), roleOf: roleFor}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: slogPrinter{s.log}})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopHub = h.Watch(s.hub.publish)
	go s.poll(s.ctx)
	return s
}

// slogPrinter gives promhttp a logger.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Warn("metrics", "err", v) }

// newHTTPServer builds an http.Server with the limits that keep hostile
// clients from holding the service: header and idle timeouts, small
// headers, and (through Serve's listener) a bound on connections.
func (s *Server) newHTTPServer(h http.Handler) (*http.Server, error) {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		ReadTimeout:       s.cfg.RequestTimeout,
		WriteTimeout:      30 * time.Second, // the event stream moves its own deadline
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cl := caller{}
			if ac, ok := c.(*limitedConn); ok {
				cl = ac.caller
				ctx = context.WithValue(ctx, connKey{}, ac.Conn)
			}
			return context.WithValue(ctx, callerKey{}, cl)
		},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return nil, http.ErrServerClosed
	}
	s.servers = append(s.servers, hs)
	return hs, nil
}

// Serve answers the API on l (a unix socket listener: callers are told
// apart by their SO_PEERCRED credentials) until Shutdown. It returns
// http.ErrServerClosed after Shutdown.
func (s *Server) Serve(l net.Listener) error {
	hs, err := s.newHTTPServer(http.HandlerFunc(s.routes))
	if err != nil {
		l.Close()
		return err
	}
	return hs.Serve(newLimitedListener(l, s.cfg.MaxConns, func(c net.Conn) caller {
		cr, err := peerCred(c)
		if err != nil {
			return caller{}
		}
		return caller{uid: cr.Uid, gid: cr.Gid, pid: cr.Pid, known: true, role: s.roleOf(cr.Uid, cr.Gid, s.cfg.Group)}
	}))
}

// ServeMetrics answers only /metrics on l (a TCP listener: whoever can
// connect may read the metrics, which hold no secret) until Shutdown.
func (s *Server) ServeMetrics(l net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			writeError(w, http.StatusNotFound, apiError{Error: "only /metrics is served here"})
			return
		}
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		s.metrics.ServeHTTP(w, r)
	})
	hs, err := s.newHTTPServer(mux)
	if err != nil {
		l.Close()
		return err
	}
	return hs.Serve(newLimitedListener(l, s.cfg.MaxConns, func(net.Conn) caller { return caller{role: roleMetrics} }))
}

// Run listens on cfg.Socket (and cfg.MetricsAddr when set) and serves until
// ctx is done, then shuts down (publishing stopping). It returns the first
// listener error, or nil after an orderly stop.
func (s *Server) Run(ctx context.Context) error {
	l, err := Listen(s.cfg.Socket)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- s.Serve(l) }()
	if s.cfg.MetricsAddr != "" {
		ml, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			s.Shutdown(context.Background())
			return err
		}
		go func() { errc <- s.ServeMetrics(ml) }()
	}
	s.log.Info("service listening", "socket", s.cfg.Socket, "metrics", s.cfg.MetricsAddr)
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return s.Shutdown(sctx)
	case err := <-errc:
		s.Shutdown(context.Background())
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Shutdown publishes a stopping event, ends every event stream, stops the
// poller and the Host's publishing, closes the listeners and waits (until
// ctx is done) for the requests in flight. It does not bring tunnels down:
// that is the Host's owner's decision.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.shutdown = true
	servers := s.servers
	s.mu.Unlock()

	s.hub.publish(Event{Type: EventStopping})
	s.hub.close()
	s.stopHub()
	s.cancel()
	var first error
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
