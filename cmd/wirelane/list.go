package main

// `wirelane list`: every tunnel a user (or a tray client) can switch on or
// off, with its state.
//
//	ConfigDir/*.conf ──┐
//	UAPI sockets ──────┼─> one row per name: up/down, kind, config, address
//	ovpn status files ─┘

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/ovpn/ovpncli"
)

const listHelp = `Lists the tunnels you can switch on and off, and whether each is up:
every wg-quick file in /etc/wireguard (NAME.conf; "wirelane up NAME" starts
it, "wirelane down NAME" stops it), every running WireGuard interface (also
those started without a file), and the OpenVPN tunnels of "wirelane ovpn
connect|serve" (stopped by signalling their pid).

--json prints one document for programs, with a stable schema (fields are
only ever added):
  {"schema": 1, "tunnels": [{"name", "kind" (wireguard|openvpn-client|
    openvpn-server), "state" (up|down), "config" (path or ""),
    "pid" (openvpn only, else 0), "peers" (wireguard, up only),
    "latest_handshake_unix" (newest of its peers, 0 = never)}]}`

// listEntry is one row of `wirelane list`.
type listEntry struct {
	Name            string `json:"name"`
	Kind            string `json:"kind"`
	State           string `json:"state"`
	Config          string `json:"config"`
	PID             int    `json:"pid"`
	Peers           int    `json:"peers"`
	LatestHandshake int64  `json:"latest_handshake_unix"`
}

func cmdList(args []string) int {
	flags := flag.NewFlagSet("list", flag.ContinueOnError)
	asJSON := flags.Bool("json", false, "print JSON for programs (the schema is in --help)")
	if _, st := parseFlags(flags, "list", args, 0, 0); st >= 0 {
		return st
	}
	var devs []*wgtypes.Device
	c, err := wgctrl.New()
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	devs, err = listDevices(c)
	if err != nil {
		return fail(fmt.Errorf("unable to list interfaces: %w", err))
	}
	ovpns, oerr := ovpncli.Status()
	if oerr != nil {
		fmt.Fprintf(os.Stderr, "%s: warning: OpenVPN tunnel status: %v\n", prog, oerr)
	}
	confs, cerr := configFiles(wgquick.ConfigDir)
	if cerr != nil {
		fmt.Fprintf(os.Stderr, "%s: warning: %v\n", prog, cerr)
	}
	entries := listEntries(confs, devs, ovpns)
	if *asJSON {
		return writeOrFail(writeListJSON(os.Stdout, entries))
	}
	return writeOrFail(writeListText(os.Stdout, entries))
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
func listEntries(confs map[string]string, devs []*wgtypes.Device, ovpns []ovpncli.TunnelStatus) []listEntry {
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

func writeListJSON(w io.Writer, entries []listEntry) error {
	if entries == nil {
		entries = []listEntry{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema  int         `json:"schema"`
		Tunnels []listEntry `json:"tunnels"`
	}{1, entries})
}

func writeListText(w io.Writer, entries []listEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(w, "no tunnels (no files in %s, none running)\n", wgquick.ConfigDir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tKIND\tCONFIG")
	for _, e := range entries {
		cfg := e.Config
		if cfg == "" {
			cfg = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.State, e.Kind, cfg)
	}
	return tw.Flush()
}
