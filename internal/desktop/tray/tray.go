package tray

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"fyne.io/systray"
	"github.com/godbus/dbus/v5"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
)

// Config is what Run needs.
type Config struct {
	// Socket is the service's API socket ("" = service.DefaultSocket).
	Socket string
	// Zenity is the dialog program ("" = zenity on PATH).
	Zenity string
	// Logger receives the tray's logs (default: discarded).
	Logger *slog.Logger
	// Options tune the menu (DefaultOptions when zero).
	Options *Options
	// Retry is the first wait before reconnecting to the service (default
	// 1 s; it doubles up to 5 s while the service stays away).
	Retry time.Duration
}

// Tray is a running tray.
type Tray struct {
	cfg     Config
	log     *slog.Logger
	cli     *client.Client
	notes   *Notifier
	dialogs *Dialogs
	opts    Options
	kick    chan struct{} // buffered 1: the state changed, render

	mu      sync.Mutex
	st      *State          // guarded by mu
	current map[string]Item // guarded by mu: the rendered menu's clickable items by key
	asking  map[string]bool // guarded by mu: tunnels with an open credential dialog
	warned  bool            // guarded by mu: a notification failure was logged
}

// Run shows the tray on the session bus until ctx ends or the user picks
// Quit. It returns an error only when there is no session bus to show it
// on.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	// systray takes the shared session bus and has no way to report that
	// there is none: check first, on a connection of our own (the
	// notifications and the portal's signals use it too).
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return fmt.Errorf("no D-Bus session bus (is DBUS_SESSION_BUS_ADDRESS set?): %w", err)
	}
	defer conn.Close()
	t := &Tray{
		cfg:     cfg,
		log:     cfg.Logger,
		cli:     client.New(cfg.Socket),
		notes:   NewNotifier(conn),
		dialogs: &Dialogs{Conn: conn, Zenity: cfg.Zenity},
		kick:    make(chan struct{}, 1),
		st:      NewState(),
		current: map[string]Item{},
		asking:  map[string]bool{},
	}
	if cfg.Options != nil {
		t.opts = *cfg.Options
	} else {
		t.opts = DefaultOptions()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		systray.Quit()
	}()
	systray.Run(func() { t.ready(ctx) }, cancel)
	return nil
}

func (t *Tray) ready(ctx context.Context) {
	r := newRenderer(t.click, t.log)
	shown := newShown(time.Now())
	t.renderOnce(r, shown)
	go t.follow(ctx)
	go t.renderLoop(ctx, r, shown)
}

// settle is how long after start the tray sets its icon and tooltip on
// every render, changed or not. fyne.io/systray calls ready before it has
// exported its D-Bus properties: a value set while it exports is stored
// but never published (the export took the older snapshot), so a tray
// that set each value only on change could show "connecting" for ever.
// The export takes milliseconds; ten seconds of renders cover it even on
// a loaded machine.
const settle = 10 * time.Second

// title is the tray item's title (its name in the host's list of items).
const title = "Wirelane"

// shown remembers what the tray last handed to systray, so that after
// the settle period it sets the icon and tooltip only when they change.
// It is used by one goroutine at a time (ready, then the render loop).
type shown struct {
	until time.Time
	icon  Icon
	tip   string
}

func newShown(start time.Time) *shown {
	return &shown{until: start.Add(settle), icon: -1}
}

// update says which of title, icon and tooltip to set now, and records
// them. The title never changes, so it is set only while settling.
func (s *shown) update(now time.Time, ic Icon, tp string) (setTitle, setIcon, setTip bool) {
	settling := now.Before(s.until)
	setIcon, setTip = settling || s.icon != ic, settling || s.tip != tp
	s.icon, s.tip = ic, tp
	return settling, setIcon, setTip
}

// changed asks the render loop for a new menu.
func (t *Tray) changed() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// renderLoop renders on every change, at most five times a second, and
// once a second for the labels that tick ("12 seconds ago").
func (t *Tray) renderLoop(ctx context.Context, r *renderer, s *shown) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		case <-tick.C:
		}
		t.renderOnce(r, s)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (t *Tray) renderOnce(r *renderer, s *shown) {
	t.mu.Lock()
	items := Build(t.st, time.Now(), t.opts)
	ic, tp := IconFor(t.st), Tooltip(t.st)
	clear(t.current)
	var index func([]Item)
	index = func(items []Item) {
		for _, it := range items {
			if it.Op != OpNone {
				t.current[it.Key] = it
			}
			index(it.Children)
		}
	}
	index(items)
	t.mu.Unlock()
	r.render(items)
	setTitle, setIcon, setTip := s.update(time.Now(), ic, tp)
	if setTitle {
		systray.SetTitle(title)
	}
	if setIcon {
		systray.SetIcon(IconPNG(ic))
	}
	if setTip {
		systray.SetTooltip(tp)
	}
}

// follow keeps the event stream open, reconnecting when the service goes
// away, and applies its events to the state.
func (t *Tray) follow(ctx context.Context) {
	wait := t.cfg.Retry
	for ctx.Err() == nil {
		err := t.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		link, problem := LinkDown, describe(err)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == http.StatusForbidden {
			link = LinkForbidden
		}
		t.mu.Lock()
		opened := t.st.Link == LinkUp
		// A stream that ended after the service said it was stopping keeps
		// that reason.
		if err != nil || t.st.Link != LinkDown || t.st.Problem == "" {
			t.st.Lost(link, problem)
		}
		t.mu.Unlock()
		t.changed()
		if opened {
			wait = t.cfg.Retry // it was up: try again soon
		}
		t.log.Info("service link lost", "err", problem)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if link == LinkForbidden {
			wait = 10 * time.Second // group membership changes need a new login
		} else if wait *= 2; wait > 5*time.Second {
			wait = 5 * time.Second
		}
	}
}

// describe says what went wrong with the stream in the menu's words.
func describe(err error) string {
	var ce *client.Error
	var ue *url.Error
	switch {
	case err == nil:
		return "the service closed the event stream"
	case errors.As(err, &ce):
		return ce.Msg
	case errors.Is(err, fs.ErrNotExist):
		return "no service socket (is wirelaned running?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the service's socket refuses connections (is wirelaned running?)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied on the service's socket"
	case errors.As(err, &ue):
		return ue.Err.Error() // without the request's method and URL
	}
	return err.Error()
}

// stream opens the event stream and applies it until it ends.
func (t *Tray) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A service that accepts but never answers must not hang the tray:
	// the answer's head must come within 5 s (the stream itself may then
	// be quiet for as long as nothing happens).
	timer := time.AfterFunc(5*time.Second, cancel)
	evs, err := t.cli.Events(sctx)
	if !timer.Stop() && err == nil {
		evs.Close()
		err = errors.New("the service did not answer within 5 s")
	}
	if err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			err = errors.New("the service did not answer within 5 s")
		}
		return err
	}
	defer evs.Close()
	t.mu.Lock()
	t.st.Connected()
	t.mu.Unlock()
	t.changed()
	t.log.Info("following the service's events", "socket", t.cfg.Socket)
	for evs.Next() {
		e := evs.Event()
		t.mu.Lock()
		notes := t.st.Apply(e)
		t.mu.Unlock()
		t.changed()
		for _, n := range notes {
			go t.notify(n)
		}
		if e.Type == service.EventAuth && e.Auth != nil && e.Tunnel != "" {
			go t.answer(ctx, e.Tunnel, *e.Auth)
		}
		if e.Type == service.EventStopping {
			break
		}
	}
	if err := evs.Err(); err != nil {
		return fmt.Errorf("the service's event stream broke: %w", err)
	}
	return nil
}

// notify shows n, logging the first failure (no notification daemon).
func (t *Tray) notify(n Note) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.notes.Notify(ctx, n); err != nil {
		t.mu.Lock()
		first := !t.warned
		t.warned = true
		t.mu.Unlock()
		if first {
			t.log.Warn("cannot show notifications", "err", err)
		}
	}
}

// click runs the menu entry key.
func (t *Tray) click(key string) {
	t.mu.Lock()
	it, ok := t.current[key]
	t.mu.Unlock()
	if !ok || !it.Enabled {
		return
	}
	switch it.Op {
	case OpUp, OpDown:
		go t.switchTunnel(it.Op, it.Tunnel)
	case OpImport:
		go t.importFile()
	case OpQuit:
		systray.Quit()
	}
}

// switchTunnel brings a tunnel up or down through the service.
func (t *Tray) switchTunnel(op Op, name string) {
	t.mu.Lock()
	if t.st.Busy[name] {
		t.mu.Unlock()
		return
	}
	t.st.Busy[name] = true
	t.mu.Unlock()
	t.changed()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	verb := "up"
	if op == OpUp {
		_, err = t.cli.Up(ctx, name)
	} else {
		verb = "down"
		_, err = t.cli.Down(ctx, name)
	}
	t.mu.Lock()
	delete(t.st.Busy, name)
	var ce *client.Error
	isErr := errors.As(err, &ce)
	if isErr && ce.Status == http.StatusForbidden {
		t.st.ReadOnly = ce.Msg
	}
	t.mu.Unlock()
	t.changed()
	if err == nil {
		return
	}
	t.log.Warn("switching a tunnel", "tunnel", name, "op", verb, "err", err)
	// A bring-up that failed shows as a failed tunnel, notified from the
	// event stream with its error; other refusals are notified here.
	if isErr && (ce.Status == http.StatusInternalServerError || ce.Status == http.StatusBadRequest) {
		return
	}
	t.notify(Note{Key: name, Summary: fmt.Sprintf("Could not bring %s %s", Clip(name, 40), verb), Body: Clip(err.Error(), 300), Urgent: true})
}

// importFile asks for a file and imports it.
func (t *Tray) importFile() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path, err := t.dialogs.PickFile(ctx)
	if errors.Is(err, ErrCancelled) {
		return
	}
	if err != nil {
		t.notify(Note{Key: "import", Summary: "Cannot open the file chooser", Body: Clip(err.Error(), 300), Urgent: true})
		return
	}
	req, err := ImportRequestFor(path)
	if err != nil {
		t.notify(Note{Key: "import", Summary: "Not imported", Body: Clip(err.Error(), 300), Urgent: true})
		return
	}
	tn, err := t.cli.Import(ctx, req)
	if err != nil {
		summary := "Could not import " + Clip(req.Name, 40)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Line > 0 {
			summary += fmt.Sprintf(" (line %d)", ce.Line)
		}
		t.notify(Note{Key: "import", Summary: summary, Body: Clip(err.Error(), 300), Urgent: true})
		return
	}
	t.notify(Note{Key: "import", Summary: "Imported " + Clip(tn.Name, 40), Body: fmt.Sprintf("A %s tunnel, down: switch it on in the menu.", kindName(tn.Kind))})
}

// answer asks the user for the credentials an auth event wants and sends
// them to the service. Nothing is kept.
func (t *Tray) answer(ctx context.Context, name string, p service.AuthPrompt) {
	t.mu.Lock()
	if t.asking[name] {
		t.mu.Unlock()
		return
	}
	t.asking[name] = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.asking, name)
		t.mu.Unlock()
	}()
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a, err := t.dialogs.AskCredentials(actx, name, p)
	if errors.Is(err, ErrCancelled) {
		return
	}
	if err == nil {
		err = t.cli.Answer(actx, name, a)
	}
	if err != nil {
		t.notify(Note{Key: name, Summary: Clip(name, 40) + ": credentials not sent", Body: Clip(err.Error(), 300), Urgent: true})
	}
}
