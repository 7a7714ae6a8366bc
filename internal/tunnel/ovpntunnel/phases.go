package ovpntunnel

// The phases of `wirelane ovpn connect` as progress lines and as events
// (ConnectOptions.OnEvent): ovpn/client reports RESOLVE to GET_CONFIG,
// Connect and the reconnector the rest:
//
//	client.Dial events -> phases.event -> ConnectOptions.OnEvent
//	                                   -> one progress line with the time since the attempt began
//	device addressed   -> ASSIGN_IP; routes -> ADD_ROUTES; ready -> CONNECTED
//	session ended      -> RECONNECTING (restartable) or EXITING

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
)

// phases reports the phases of one Connect. Events come from Connect's
// goroutine and the client's; report serialises them.
type phases struct {
	hook func(client.Event) // ConnectOptions.OnEvent, may be nil

	mu    sync.Mutex // guards the fields below
	start time.Time  // when the current attempt (first connect or a reconnect) began
}

func newPhases(hook func(client.Event)) *phases {
	return &phases{hook: hook, start: time.Now()}
}

// restart makes the times of later lines count from now.
func (p *phases) restart() {
	p.mu.Lock()
	p.start = time.Now()
	p.mu.Unlock()
}

// event takes an event of client.Dial (its Elapsed is replaced by the
// time since the attempt began).
func (p *phases) event(e client.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.Elapsed = e.Time.Sub(p.start)
	if p.hook != nil {
		p.hook(e)
	}
	if line := phaseLine(e); line != "" {
		progress("[%5.2fs] %s", e.Elapsed.Seconds(), line)
	}
}

// report is an event of the tunnel itself.
func (p *phases) report(st client.State, detail string, err error) {
	p.event(client.Event{State: st, Time: time.Now(), Detail: detail, Err: err})
}

// stopped reports EXITING after client.Dial failed for good with err
// (Dial reported it itself when it gave up retrying).
func (p *phases) stopped(err error) {
	if !errors.Is(err, client.ErrGaveUp) {
		p.report(client.StateExiting, "connection failed", err)
	}
}

// elapsed is the time since the attempt began.
func (p *phases) elapsed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.start)
}

// phaseLine is the progress line of e ("" for the steps too small for
// one: the wait for the first reply, the push request).
func phaseLine(e client.Event) string {
	if e.Err != nil {
		switch e.State {
		case client.StateResolve:
			return fmt.Sprintf("%s: %v", e.Detail, e.Err)
		case client.StateExiting:
			if errors.Is(e.Err, client.ErrGaveUp) {
				return "giving up: " + e.Detail
			}
			return "" // the command's error message says why
		}
		return fmt.Sprintf("%s: %s: %v", e.Remote, e.Detail, e.Err)
	}
	switch {
	case e.State == client.StateWait && !strings.HasPrefix(e.Detail, "no reply"),
		e.State == client.StateGetConfig && e.Detail == "requesting options":
		return ""
	}
	return e.Detail
}

// routesLine summarises the routes of p for the ADD_ROUTES line: the
// destinations grouped by gateway (at most maxRoutesNamed named), and
// the redirect.
func routesLine(p routePlan, rd redirect) string {
	if len(p.routes) == 0 {
		return "no routes pushed"
	}
	type group struct {
		via   string
		names []string
	}
	var groups []*group
	named := 0
	for _, r := range p.routes {
		via := "on-link"
		if r.gw.IsValid() {
			via = "via " + r.gw.String()
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.via == via })
		if i < 0 {
			groups = append(groups, &group{via: via})
			i = len(groups) - 1
		}
		if named < maxRoutesNamed {
			groups[i].names = append(groups[i].names, r.dst.String())
			named++
		}
	}
	var parts []string
	for _, g := range groups {
		if len(g.names) > 0 {
			parts = append(parts, strings.Join(g.names, ", ")+" "+g.via)
		}
	}
	s := fmt.Sprintf("routes added (%d): %s", len(p.routes), strings.Join(parts, "; "))
	if n := len(p.routes) - named; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	if rd.v4 || rd.v6 {
		s += "; default route through the tunnel (" + rd.line + ")"
	}
	return s
}

// maxRoutesNamed is how many routes the ADD_ROUTES line names.
const maxRoutesNamed = 6

// maxNamed is how many directive names the warnings summary lists.
const maxNamed = 8

// warningsSummary is the one or two lines `ovpn connect` always prints
// about the directives it ignored or only partly honoured: their names
// (details with -v) and, when the file has up or down scripts, where the
// DNS they usually set comes from instead.
func warningsSummary(file string, ws []config.Diagnostic, dns DNSMode) []string {
	var out []string
	var rest []config.Diagnostic
	for _, w := range ws {
		if w.Weakens {
			out = append(out, fmt.Sprintf("%s:%d: %s: %s", file, w.Line, w.Directive, w.Message))
		} else {
			rest = append(rest, w)
		}
	}
	ws = rest
	if len(ws) == 0 {
		return out
	}
	var names []string
	scripts := false
	for _, w := range ws {
		if !slices.Contains(names, w.Directive) {
			names = append(names, w.Directive)
		}
		scripts = scripts || w.Directive == "up" || w.Directive == "down"
	}
	listed := names
	if len(listed) > maxNamed {
		listed = append(slices.Clone(listed[:maxNamed]), fmt.Sprintf("and %d more", len(names)-maxNamed))
	}
	what := "directives"
	if len(names) == 1 {
		what = "directive"
	}
	out = append(out, fmt.Sprintf("%s: ignored or not fully honoured: %d %s (%s); run with -v for details",
		file, len(names), what, strings.Join(listed, ", ")))
	if scripts {
		hint := "up/down scripts are not run; such scripts usually set the pushed DNS servers, which wirelane applies itself (--dns)"
		if dns == DNSOff {
			hint = "up/down scripts are not run; such scripts usually set the pushed DNS servers, and --dns=off leaves them unapplied"
		}
		out = append(out, hint)
	}
	return out
}
