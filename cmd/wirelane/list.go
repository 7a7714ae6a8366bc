package main

// `wirelane list`: every tunnel a user (or a tray client) can switch on or
// off, with its state.
//
//	ConfigDir/*.conf ──┐
//	UAPI sockets ──────┼─> one row per name: up/down, kind, config, address
//	ovpn status files ─┘
//
// Without root, /etc/wireguard (mode 0700) cannot be read and the sockets
// (mode 0600) do not answer: list then shows what it can (the running
// tunnels, by their socket names) and says plainly what it could not see.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const listHelp = `Lists the tunnels you can switch on and off, and whether each is up:
every wg-quick file in /etc/wireguard (NAME.conf; "wirelane up NAME" starts
it, "wirelane down NAME" stops it), every running WireGuard interface (also
those started without a file), and the OpenVPN tunnels of "wirelane ovpn
connect|serve" (stopped by signalling their pid).

When the Wirelane service runs (wirelaned(8); its socket answers you), the
list is the service's: its WireGuard, gateway and OpenVPN tunnels with
their states (also starting, stopping, reconnecting and failed, with the
error), readable by the members of the group wirelane too.

Without root it shows what it can: the running tunnels by name, but not
the tunnels that are down (their files in /etc/wireguard are readable by
root only) nor peers and handshakes (the daemons' sockets answer root
only), and it says so.

--json prints one document for programs, with a stable schema (fields are
only ever added):
  {"schema": 1, "tunnels": [{"name", "kind" (wireguard|openvpn-client|
    openvpn-server, gateway), "state" (up|down; from the service also
    starting|stopping|reconnecting|failed), "error" (failed only),
    "config" (path or ""),
    "pid" (openvpn only, else 0), "peers" (wireguard, up only),
    "latest_handshake_unix" (newest of its peers, 0 = never),
    "restricted" (true: running, but peers and handshake need root)}],
   "notes": ["what could not be seen, and why", ...] (absent when none)}`

// listEntry is one row of `wirelane list`.
type listEntry struct {
	Name            string `json:"name"`
	Kind            string `json:"kind"`
	State           string `json:"state"`
	Error           string `json:"error,omitempty"`
	Config          string `json:"config"`
	PID             int    `json:"pid"`
	Peers           int    `json:"peers"`
	LatestHandshake int64  `json:"latest_handshake_unix"`
	// Restricted marks a running tunnel whose daemon would not answer
	// (its socket is root's): Peers and LatestHandshake are unknown.
	Restricted bool `json:"restricted,omitempty"`
}

func cmdList(args []string) int {
	flags := flag.NewFlagSet("list", flag.ContinueOnError)
	asJSON := flags.Bool("json", false, "print JSON for programs (the schema is in --help)")
	if _, st := parseFlags(flags, "list", args, 0, 0); st >= 0 {
		return st
	}
	if c, ts := serviceClient(); c != nil {
		ovpns, _ := ovpntunnel.Status()
		entries := serviceEntries(ts, ovpns)
		if *asJSON {
			return writeOrFail(writeListJSON(os.Stdout, entries))
		}
		return writeOrFail(writeListText(os.Stdout, entries, true))
	}
	eng := &wgtunnel.Daemon{}
	defer eng.Close()
	devs, noAccess, err := listRunning(eng)
	if err != nil {
		return fail(fmt.Errorf("unable to list interfaces: %w", err))
	}
	var notes []string
	ovpns, oerr := ovpntunnel.Status()
	var unreadable *ovpntunnel.UnreadableError
	switch {
	case errors.As(oerr, &unreadable):
		notes = append(notes, oerr.Error())
	case oerr != nil:
		notes = append(notes, fmt.Sprintf("OpenVPN tunnels are not listed: %v", oerr))
	}
	confs, cerr := configFiles(wgquick.ConfigDir)
	switch {
	case errors.Is(cerr, fs.ErrPermission):
		notes = append(notes, fmt.Sprintf("tunnels that are down are not listed: only root can read %s", wgquick.ConfigDir))
	case cerr != nil:
		notes = append(notes, fmt.Sprintf("tunnels that are down are not listed: %v", cerr))
	}
	if len(noAccess) > 0 {
		notes = append(notes, fmt.Sprintf("peers and handshakes of %s are not shown: only root may talk to the daemons (%s)", strings.Join(noAccess, ", "), uapi.SocketPath("NAME")))
	}
	if len(notes) > 0 && os.Geteuid() != 0 {
		notes = append(notes, "'sudo "+prog+" list' shows everything")
	}
	for _, n := range noAccess {
		devs = append(devs, &wgtypes.Device{Name: n})
	}
	entries := listEntries(confs, devs, ovpns)
	for i := range entries {
		for _, n := range noAccess {
			if entries[i].Name == n && entries[i].Kind == "wireguard" {
				entries[i].Restricted = true
			}
		}
	}
	if *asJSON {
		return writeOrFail(writeListJSON(os.Stdout, entries, notes...))
	}
	if err := writeListText(os.Stdout, entries, cerr == nil); err != nil {
		return fail(err)
	}
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "%s list: %s\n", prog, n)
	}
	return 0
}

// listRunning returns the running WireGuard interfaces (Daemon.Devices),
// and when some daemons refuse to answer (their sockets are root's) the
// names of those, which are up but whose peers are unknown.
func listRunning(eng *wgtunnel.Daemon) (devs []*wgtypes.Device, noAccess []string, err error) {
	devs, err = eng.Devices()
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return devs, nil, err
	}
	socks, err := filepath.Glob(uapi.SocketPath("*"))
	if err != nil {
		return nil, nil, err
	}
	devs = nil
	for _, s := range socks {
		name := strings.TrimSuffix(filepath.Base(s), ".sock")
		d, err := eng.Device(name)
		switch {
		case err == nil:
			devs = append(devs, d)
		case errors.Is(err, fs.ErrPermission):
			// A socket without its interface is a dead daemon's.
			if _, err := os.Stat(filepath.Join("/sys/class/net", name)); err == nil {
				noAccess = append(noAccess, name)
			}
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
			// Gone meanwhile, or a stale socket only root may remove.
		default:
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return devs, noAccess, nil
}

func writeOrFail(err error) int {
	if err != nil {
		return fail(err)
	}
	return 0
}

// configFiles returns the wg-quick files of dir by interface name. Files
// whose name is not a valid interface name are not tunnels wg-quick (or
// up) could start, and are left out. A missing dir is not an error.
func configFiles(dir string) (map[string]string, error) {
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot list the configuration files: %w", err)
	}
	out := map[string]string{}
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".conf")
		if !ok || !wgquick.ValidInterfaceName(name) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out[name] = p
	}
	return out, nil
}

// listEntries merges configuration files, running interfaces and OpenVPN
// tunnels into rows sorted by name (then kind).
func listEntries(confs map[string]string, devs []*wgtypes.Device, ovpns []ovpntunnel.TunnelStatus) []listEntry {
	byName := map[string]*listEntry{}
	var out []listEntry
	for name, path := range confs {
		byName[name] = &listEntry{Name: name, Kind: "wireguard", State: "down", Config: path}
	}
	for _, d := range devs {
		e := byName[d.Name]
		if e == nil {
			e = &listEntry{Name: d.Name, Kind: "wireguard"}
			byName[d.Name] = e
		}
		e.State = "up"
		e.Peers = len(d.Peers)
		for _, p := range d.Peers {
			if t := p.LastHandshakeTime; !t.IsZero() && t.Unix() > e.LatestHandshake {
				e.LatestHandshake = t.Unix()
			}
		}
	}
	for _, e := range byName {
		out = append(out, *e)
	}
	for _, t := range ovpns {
		name := t.Interface
		if name == "" {
			name = fmt.Sprintf("pid-%d", t.PID) // dev null: no device to name it by
		}
		out = append(out, listEntry{Name: name, Kind: "openvpn-" + t.Kind, State: "up", Config: t.Config, PID: t.PID})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// serviceEntries are the rows of the service's tunnels, and of the
// OpenVPN tunnels run outside it (`wirelane ovpn connect|serve`).
func serviceEntries(ts []service.Tunnel, ovpns []ovpntunnel.TunnelStatus) []listEntry {
	var out []listEntry
	configs := map[string]bool{}
	for _, t := range ts {
		e := listEntry{Name: t.Name, Kind: string(t.Kind), State: string(t.State), Error: t.Error, Config: t.Config, Peers: len(t.Peers)}
		if !isWireGuard(&t) {
			e.Peers = 0 // the schema counts WireGuard peers only
		}
		for _, p := range t.Peers {
			if p.LatestHandshake != nil && p.LatestHandshake.Unix() > e.LatestHandshake {
				e.LatestHandshake = p.LatestHandshake.Unix()
			}
		}
		if t.Config != "" {
			configs[t.Config] = true
		}
		out = append(out, e)
	}
	var outside []ovpntunnel.TunnelStatus
	for _, o := range ovpns {
		if !configs[o.Config] {
			outside = append(outside, o)
		}
	}
	out = append(out, listEntries(nil, nil, outside)...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// writeListJSON writes the --json document; notes say what could not be
// seen.
func writeListJSON(w io.Writer, entries []listEntry, notes ...string) error {
	if entries == nil {
		entries = []listEntry{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema  int         `json:"schema"`
		Tunnels []listEntry `json:"tunnels"`
		Notes   []string    `json:"notes,omitempty"`
	}{1, entries, notes})
}

// writeListText writes the table. filesRead says whether the
// configuration directory could be read: "no tunnels" claims no files only
// when it could.
func writeListText(w io.Writer, entries []listEntry, filesRead bool) error {
	if len(entries) == 0 {
		var err error
		if filesRead {
			_, err = fmt.Fprintf(w, "no tunnels (no files in %s, none running)\n", wgquick.ConfigDir)
		} else {
			_, err = fmt.Fprintf(w, "no running tunnels\n")
		}
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tKIND\tCONFIG")
	for _, e := range entries {
		cfg := e.Config
		if cfg == "" {
			cfg = "-"
		}
		if e.Config == "" && e.Restricted {
			cfg = "? (root only)"
		}
		state := e.State
		if e.Error != "" {
			state += ": " + e.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, state, e.Kind, cfg)
	}
	return tw.Flush()
}
