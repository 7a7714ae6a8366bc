package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const showHelp = `Shows the state of WireGuard interfaces as 'wg show' does: keys (private and
preshared keys hidden), listening port, fwmark, and per peer the endpoint,
allowed IPs, latest handshake, transfer and persistent keepalive.
With no argument or "all", every interface; "interfaces" lists their names.

--json prints one document for programs, with a stable schema (fields are
only ever added):
  {"schema": 1, "interfaces": [{"name", "public_key", "listen_port", "fwmark",
    "peers": [{"public_key", "has_preshared_key", "endpoint", "allowed_ips",
      "latest_handshake" (RFC 3339 or null), "latest_handshake_unix" (0 = never),
      "rx_bytes", "tx_bytes", "persistent_keepalive" (seconds, 0 = off)}]}],
   "openvpn": [{"kind" (client|server), "pid", "interface", "config", "remote",
     "proto", "cipher", "address", "since", "rx_bytes", "tx_bytes",
     "clients": [...] (server only), "updated"}]}

OpenVPN tunnels started by "wirelane ovpn connect|serve" are listed after
the WireGuard interfaces.`

func cmdShow(args []string) int {
	flags := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := flags.Bool("json", false, "print JSON for programs (schema above)")
	rest, st := parseFlags(flags, "show", args, 0, 1)
	if st >= 0 {
		return st
	}
	what := "all"
	if len(rest) == 1 {
		what = rest[0]
	}
	eng := &wgtunnel.Daemon{}
	defer eng.Close()

	// OpenVPN tunnels publish status files; one that cannot be read is
	// reported and skipped rather than hiding the WireGuard interfaces.
	ovpns, oerr := ovpntunnel.Status()
	if oerr != nil {
		fmt.Fprintf(os.Stderr, "%s: warning: OpenVPN tunnel status: %v\n", prog, oerr)
	}

	var devs []*wgtypes.Device
	var err error
	switch what {
	case "all", "interfaces":
		devs, err = eng.Devices()
		if err != nil {
			return fail(fmt.Errorf("unable to list interfaces: %w", err))
		}
	default:
		st, err := wgtunnel.Status(what, wgtunnel.Options{Engine: eng})
		switch {
		case err != nil:
			return fail(fmt.Errorf("unable to access interface %s: %w", what, err))
		case st.Stale:
			return fail(fmt.Errorf("unable to access interface %s: its daemon is not running (%s)", what, wgtunnel.RemoveStaleSocket(what)))
		case !st.Up:
			if t, ok := findOvpn(ovpns, what); ok {
				return showOvpn(t, *asJSON)
			}
			return fail(fmt.Errorf("unable to access interface %s: no such WireGuard interface", what))
		}
		devs = []*wgtypes.Device{st.Device}
		ovpns = nil // one WireGuard interface was asked for
	}
	if *asJSON {
		if err := writeShowJSON(os.Stdout, devs, ovpns); err != nil {
			return fail(err)
		}
		return 0
	}
	if what == "interfaces" {
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = d.Name
		}
		for _, t := range ovpns {
			if t.Interface != "" {
				names = append(names, t.Interface)
			}
		}
		if len(names) > 0 {
			fmt.Println(strings.Join(names, " "))
		}
		return 0
	}
	now := time.Now()
	for i, d := range devs {
		if i > 0 {
			fmt.Println()
		}
		if err := wgquick.FormatDevice(os.Stdout, d, now); err != nil {
			return fail(err)
		}
	}
	if len(ovpns) > 0 {
		if len(devs) > 0 {
			fmt.Println()
		}
		if err := ovpntunnel.FormatStatus(os.Stdout, ovpns); err != nil {
			return fail(err)
		}
	}
	return 0
}

// findOvpn returns the OpenVPN tunnel on interface name.
func findOvpn(ts []ovpntunnel.TunnelStatus, name string) (ovpntunnel.TunnelStatus, bool) {
	for _, t := range ts {
		if t.Interface == name {
			return t, true
		}
	}
	return ovpntunnel.TunnelStatus{}, false
}

// showOvpn prints one OpenVPN tunnel, as text or as the JSON document.
func showOvpn(t ovpntunnel.TunnelStatus, asJSON bool) int {
	var err error
	if asJSON {
		err = writeShowJSON(os.Stdout, nil, []ovpntunnel.TunnelStatus{t})
	} else {
		err = ovpntunnel.FormatStatus(os.Stdout, []ovpntunnel.TunnelStatus{t})
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// showDocument is the `show --json` document: the WireGuard part defined by
// internal/tunnel/wgquick plus the OpenVPN tunnels.
type showDocument struct {
	wgquick.ShowJSON
	OpenVPN []ovpntunnel.TunnelStatus `json:"openvpn"`
}

// writeShowJSON writes the `show --json` document.
func writeShowJSON(w io.Writer, devs []*wgtypes.Device, ovpns []ovpntunnel.TunnelStatus) error {
	doc := showDocument{
		ShowJSON: wgquick.ShowJSON{Schema: wgquick.ShowJSONSchema, Interfaces: []wgquick.InterfaceJSON{}},
		OpenVPN:  append([]ovpntunnel.TunnelStatus{}, ovpns...),
	}
	for _, d := range devs {
		doc.Interfaces = append(doc.Interfaces, wgquick.DeviceJSON(d))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
