package tray

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
)

// Kind is what sort of menu entry an Item is.
type Kind int

// The kinds of menu entry.
const (
	// Text is a line to read, not to click (shown disabled).
	Text Kind = iota
	// Toggle is a checkbox entry: a tunnel's switch.
	Toggle
	// Action is an entry that does something when clicked.
	Action
	// Submenu holds Children.
	Submenu
	// Separator is a line between groups.
	Separator
)

// Op is what clicking an Item does.
type Op int

// The operations behind the menu's entries.
const (
	OpNone   Op = iota
	OpUp        // bring Tunnel up
	OpDown      // bring Tunnel down
	OpImport    // pick a file and import it
	OpQuit      // end the tray
)

// Item is one entry of the menu, as the model wants it. Key names it
// stably across rebuilds (the glue updates an entry in place while the
// keys and kinds stay the same); Label is the text as the user reads it,
// before any escaping for D-Bus.
type Item struct {
	Key      string
	Kind     Kind
	Label    string
	Checked  bool // Toggle
	Enabled  bool // Toggle and Action; Text is never enabled
	Op       Op
	Tunnel   string // OpUp, OpDown
	Children []Item // Submenu
}

// Options tune Build.
type Options struct {
	// Inline is how many tunnels the menu itself lists; the others go into
	// "More tunnels" submenus of at most PerSubmenu each (defaults 10 and
	// 25).
	Inline, PerSubmenu int
	// MaxPeers is how many peers a tunnel's submenu lists (default 8).
	MaxPeers int
	// Root tells whether the tray runs as root: only root may import.
	Root bool
}

func (o *Options) defaults() {
	if o.Inline <= 0 {
		o.Inline = 10
	}
	if o.PerSubmenu <= 0 {
		o.PerSubmenu = 25
	}
	if o.MaxPeers <= 0 {
		o.MaxPeers = 8
	}
}

// DefaultOptions are the options for the running user.
func DefaultOptions() Options { return Options{Root: os.Geteuid() == 0} }

// kindName is a tunnel kind as a label shows it.
func kindName(k service.Kind) string {
	switch k {
	case service.KindWireGuard:
		return "WireGuard"
	case service.KindGateway:
		return "gateway"
	case service.KindOpenVPNClient:
		return "OpenVPN client"
	case service.KindOpenVPNServer:
		return "OpenVPN server"
	}
	return Clip(string(k), 20)
}

// Build returns the menu for s, seen at now: a status line (or why the
// tray cannot do anything), a separator, the tunnels as toggles with their
// states, a submenu of details under each tunnel that is up, the overflow
// of many tunnels, then Import and Quit. It has one separator, after the
// status lines, whatever the state (the renderer relies on that).
func Build(s *State, now time.Time, o Options) []Item {
	o.defaults()
	var m []Item
	text := func(key, label string) Item { return Item{Key: key, Kind: Text, Label: Clip(label, maxLabel)} }
	switch s.Link {
	case LinkConnecting:
		m = append(m, text("status", "Wirelane: connecting to the service…"))
	case LinkDown:
		m = append(m, text("status", "Wirelane: the service is not running (retrying)"))
		if s.Problem != "" {
			m = append(m, text("problem", s.Problem))
		}
	case LinkForbidden:
		m = append(m, text("status", "Wirelane: read-only, not permitted"))
		m = append(m, wrapText("problem", s.Problem)...)
		m = append(m, text("hint", "Ask an administrator to add you to the service's group."))
	case LinkUp:
		ts := s.Sorted()
		up := 0
		for _, t := range ts {
			if t.State == service.StateUp {
				up++
			}
		}
		switch {
		case len(ts) == 0:
			m = append(m, text("status", "Wirelane: no tunnels (import one below)"))
		case up == 0:
			m = append(m, text("status", fmt.Sprintf("Wirelane: no tunnel up (%d %s)", len(ts), plural(len(ts), "tunnel"))))
		default:
			m = append(m, text("status", fmt.Sprintf("Wirelane: %d of %d %s up", up, len(ts), plural(len(ts), "tunnel"))))
		}
		if s.ReadOnly != "" {
			m = append(m, text("readonly", "Read-only: the service refused a change"))
			m = append(m, wrapText("readonly-why", s.ReadOnly)...)
		}
	}
	// The one separator: the renderer never removes an entry (see
	// render.go), and a separator cannot be hidden, so the menu keeps
	// exactly this one, always in the same place.
	m = append(m, Item{Key: "sep-top", Kind: Separator})
	if s.Link == LinkUp {
		m = append(m, tunnelItems(s, now, o)...)
	}
	imp := Item{Key: "import", Kind: Action, Label: "Import tunnel from file…", Op: OpImport, Enabled: s.Link == LinkUp && s.ReadOnly == ""}
	if !o.Root {
		imp.Label = "Import tunnel from file… (root only)"
		imp.Enabled = false
	}
	m = append(m, imp, Item{Key: "quit", Kind: Action, Label: "Quit", Op: OpQuit, Enabled: true})
	return m
}

// wrapText splits a long message over up to three Text lines.
func wrapText(key, msg string) []Item {
	const width = 60
	words := strings.Fields(Clip(msg, 3*width))
	var lines []string
	var cur string
	for _, w := range words {
		if cur != "" && len([]rune(cur))+1+len([]rune(w)) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	var out []Item
	for i, l := range lines {
		if i == 3 {
			break
		}
		out = append(out, Item{Key: fmt.Sprintf("%s-%d", key, i), Kind: Text, Label: Clip(l, maxLabel)})
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// tunnelItems lists the tunnels: the first o.Inline inline (those not down
// first, so a tunnel in use is never hidden in the overflow), the rest in
// "More tunnels" submenus, each part sorted by name.
func tunnelItems(s *State, now time.Time, o Options) []Item {
	ts := s.Sorted()
	inline := map[string]bool{}
	for _, t := range ts {
		if len(inline) < o.Inline && t.State != service.StateDown {
			inline[t.Name] = true
		}
	}
	for _, t := range ts {
		if len(inline) < o.Inline {
			inline[t.Name] = true
		}
	}
	var out, rest []Item
	for _, t := range ts {
		items := tunnelEntry(s, t, now, o)
		if inline[t.Name] {
			out = append(out, items...)
		} else {
			rest = append(rest, items...)
		}
	}
	if len(rest) == 0 {
		return out
	}
	// Cut the rest into submenus of at most PerSubmenu tunnels (a tunnel's
	// details stay beside its toggle).
	var chunk []Item
	var first, last string
	n, part := 0, 0
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		label := "More tunnels"
		if len(ts)-len(inline) > o.PerSubmenu {
			label = fmt.Sprintf("More tunnels: %s … %s", Clip(first, 20), Clip(last, 20))
		}
		out = append(out, Item{Key: fmt.Sprintf("more-%d", part), Kind: Submenu, Label: label, Children: chunk})
		chunk, n, first = nil, 0, ""
		part++
	}
	for _, it := range rest {
		if it.Kind == Toggle {
			if n == o.PerSubmenu {
				flush()
			}
			if first == "" {
				first = it.Tunnel
			}
			last = it.Tunnel
			n++
		}
		chunk = append(chunk, it)
	}
	flush()
	return out
}

// tunnelEntry is one tunnel's toggle and, when it is up, its details.
func tunnelEntry(s *State, t *service.Tunnel, now time.Time, o Options) []Item {
	st := string(t.State)
	if st == "" {
		st = "unknown"
	}
	label := fmt.Sprintf("%s (%s): %s", Clip(t.Name, 32), kindName(t.Kind), Clip(st, 16))
	on := Active(t.State)
	op := OpUp
	if on {
		op = OpDown
	}
	tg := Item{Key: "tunnel/" + t.Name, Kind: Toggle, Label: label, Checked: on, Op: op, Tunnel: t.Name,
		Enabled: s.ReadOnly == "" && !s.Busy[t.Name] && t.State != service.StateStopping}
	out := []Item{tg}
	if t.State == service.StateFailed && t.Error != "" {
		out = append(out, Item{Key: "error/" + t.Name, Kind: Text, Label: Clip("    "+t.Error, maxLabel)})
	}
	if t.State == service.StateUp || t.State == service.StateReconnecting {
		out = append(out, Item{Key: "details/" + t.Name, Kind: Submenu, Label: "    " + detailsLabel(t), Children: details(t, now, o)})
	}
	return out
}

// detailsLabel names a tunnel's submenu: its name and first addresses.
func detailsLabel(t *service.Tunnel) string {
	a := joinPrefixes(*t, 2)
	if a == "none" {
		return Clip(t.Name, 32) + " details"
	}
	return Clip(Clip(t.Name, 32)+": "+a, maxLabel)
}

// details is the submenu of a tunnel that is up: its addresses, port and
// transfer, then per peer its endpoint, latest handshake and transfer.
func details(t *service.Tunnel, now time.Time, o Options) []Item {
	k := "details/" + t.Name + "/"
	text := func(key, label string) Item { return Item{Key: k + key, Kind: Text, Label: Clip(label, maxLabel)} }
	var out []Item
	out = append(out, text("addresses", "Addresses: "+joinPrefixes(*t, 4)))
	if t.Interface != "" && t.Interface != t.Name {
		out = append(out, text("interface", "Interface: "+t.Interface))
	}
	if t.ListenPort != 0 {
		out = append(out, text("port", fmt.Sprintf("Listening on port %d", t.ListenPort)))
	}
	out = append(out, text("transfer", "Transfer: "+transfer(t.RxBytes, t.TxBytes)))
	for i, p := range t.Peers {
		if i == o.MaxPeers {
			out = append(out, text("more-peers", fmt.Sprintf("… and %d more %s", len(t.Peers)-i, plural(len(t.Peers)-i, "peer"))))
			break
		}
		pk := fmt.Sprintf("peer%d/", i)
		out = append(out, text(pk+"name", "Peer: "+peerName(p)))
		ep := "endpoint: none"
		if p.Endpoint != nil {
			ep = "endpoint: " + p.Endpoint.String()
		}
		out = append(out, text(pk+"endpoint", "    "+ep))
		out = append(out, text(pk+"handshake", "    "+since(p, now)))
		out = append(out, text(pk+"transfer", "    transfer: "+transfer(p.RxBytes, p.TxBytes)))
	}
	return out
}

// transfer is "1.20 KiB received, 5.55 KiB sent".
func transfer(rx, tx uint64) string { return Bytes(rx) + " received, " + Bytes(tx) + " sent" }

// peerName is the friendly name, else a shortened key or the common name.
func peerName(p service.Peer) string {
	switch {
	case p.Name != "":
		return Clip(p.Name, 40)
	case p.PublicKey != "":
		return Clip(p.PublicKey, 12)
	case p.CommonName != "":
		return Clip(p.CommonName, 40)
	}
	return "(unnamed)"
}

// Icon is the tray icon's state.
type Icon int

// The three icons.
const (
	IconIdle    Icon = iota // nothing up
	IconUp                  // something up, nothing wrong
	IconTrouble             // something failed or reconnecting, or no service
)

// IconFor is the icon for s.
func IconFor(s *State) Icon {
	switch s.Link {
	case LinkDown, LinkForbidden:
		return IconTrouble
	case LinkConnecting:
		return IconIdle
	}
	icon := IconIdle
	for _, t := range s.Tunnels {
		switch t.State {
		case service.StateFailed, service.StateReconnecting:
			return IconTrouble
		case service.StateUp:
			icon = IconUp
		}
	}
	return icon
}

// Tooltip is the tray's tooltip for s: the tunnels that are up, by name.
func Tooltip(s *State) string {
	switch s.Link {
	case LinkConnecting:
		return "Wirelane: connecting"
	case LinkDown:
		return "Wirelane: the service is not running"
	case LinkForbidden:
		return "Wirelane: not permitted"
	}
	var up, bad []string
	for _, t := range s.Sorted() {
		switch t.State {
		case service.StateUp:
			up = append(up, Clip(t.Name, 32))
		case service.StateFailed, service.StateReconnecting:
			bad = append(bad, Clip(t.Name, 32)+" "+string(t.State))
		}
	}
	var b strings.Builder
	b.WriteString("Wirelane: ")
	if len(up) == 0 {
		b.WriteString("no tunnel up")
	} else {
		b.WriteString(listNames(up, 5) + " up")
	}
	if len(bad) > 0 {
		b.WriteString("; " + listNames(bad, 3))
	}
	return b.String()
}

func listNames(names []string, n int) string {
	if len(names) > n {
		return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
	}
	return strings.Join(names, ", ")
}
