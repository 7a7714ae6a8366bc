package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
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
      "rx_bytes", "tx_bytes", "persistent_keepalive" (seconds, 0 = off),
      "name" (friendly name, when known)}]}],
   "openvpn": [{"kind" (client|server), "pid", "interface", "config", "remote",
     "proto", "cipher", "address", "since", "rx_bytes", "tx_bytes",
     "clients": [...] (server only), "updated"}]}

OpenVPN tunnels started by "wirelane ovpn connect|serve" (or the service)
are listed after the WireGuard interfaces.

When the Wirelane service runs (its socket answers you), the WireGuard and
gateway tunnels are the service's, with their peers' friendly names ("# Name
= ..." in a [Peer] section: "name" in the JSON), also for the members of the
group wirelane; and each of the service's tunnels shows its troubles that
are not zero, one line per kind, from the engine's counters ("dropped:
malformed 20, unknown_index 5", "rejected handshakes: mac1 3", "tun errors:
2", "socket errors: send 1"; not in the JSON: GET
/v1/tunnels/NAME/counters has them).`

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

	svc, ts := serviceClient()
	counters := serviceCounters(svc, ts)
	if ts != nil {
		if devs, names, ok := serviceDevices(ts, what); ok {
			if what != "all" && what != "interfaces" {
				ovpns = nil
			}
			return printShow(what, devs, names, ovpns, counters, *asJSON)
		}
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
				return showOvpn(t, counters, *asJSON)
			}
			return fail(fmt.Errorf("unable to access interface %s: no such WireGuard interface", what))
		}
		devs = []*wgtypes.Device{st.Device}
		ovpns = nil // one WireGuard interface was asked for
	}
	return printShow(what, devs, nil, ovpns, counters, *asJSON)
}

// countersOf returns the service's engine counters of the tunnel on an
// interface; false when the service has no such tunnel running.
type countersOf func(iface string) ([]service.Counter, bool)

// serviceCounters asks c for the counters of ts's tunnels; nil when no
// service answers (c nil).
func serviceCounters(c *client.Client, ts []service.Tunnel) countersOf {
	if c == nil {
		return nil
	}
	return func(iface string) ([]service.Counter, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return c.InterfaceCounters(ctx, ts, iface)
	}
}

// ovpn adapts counters to ovpntunnel.FormatStatusCounters (nil
// for nil).
func (counters countersOf) ovpn() func(ovpntunnel.TunnelStatus) ([]service.Counter, bool) {
	if counters == nil {
		return nil
	}
	return func(t ovpntunnel.TunnelStatus) ([]service.Counter, bool) {
		if t.Interface == "" {
			return nil, false
		}
		return counters(t.Interface)
	}
}

// lines returns what `show` prints of the service's counters of the
// tunnel on iface (none without a service).
func (counters countersOf) lines(iface string) []string {
	if counters == nil {
		return nil
	}
	cs, _ := counters(iface)
	return service.CounterLines(cs)
}

// serviceDevices returns the service's running WireGuard tunnels that
// `show what` prints; false when the service does not know the one asked
// for (or it is an OpenVPN tunnel, shown from its status file), so that
// show looks for it itself.
func serviceDevices(ts []service.Tunnel, what string) ([]*wgtypes.Device, map[wgtypes.Key]string, bool) {
	names := map[wgtypes.Key]string{}
	var devs []*wgtypes.Device
	add := func(t *service.Tunnel) {
		d, n := deviceOf(t)
		devs = append(devs, d)
		for k, v := range n {
			names[k] = v
		}
	}
	if what == "all" || what == "interfaces" {
		for i := range ts {
			if isWireGuard(&ts[i]) && ts[i].State == service.StateUp {
				add(&ts[i])
			}
		}
		return devs, names, true
	}
	for i := range ts {
		t := &ts[i]
		if (t.Name == what || t.Interface == what) && isWireGuard(t) && t.State == service.StateUp {
			add(t)
			return devs, names, true
		}
	}
	return nil, nil, false
}

// printShow prints the devices (with their peers' friendly names) and the
// OpenVPN tunnels as text or as the JSON document; as text with the
// troubles the service's counters show (counters nil: no service).
func printShow(what string, devs []*wgtypes.Device, names map[wgtypes.Key]string, ovpns []ovpntunnel.TunnelStatus, counters countersOf, asJSON bool) int {
	if asJSON {
		if err := writeShowJSON(os.Stdout, devs, names, ovpns); err != nil {
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
		if err := wgquick.FormatDeviceLines(os.Stdout, d, names, counters.lines(d.Name), now); err != nil {
			return fail(err)
		}
	}
	if len(ovpns) > 0 {
		if len(devs) > 0 {
			fmt.Println()
		}
		if err := ovpntunnel.FormatStatusCounters(os.Stdout, ovpns, counters.ovpn()); err != nil {
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
func showOvpn(t ovpntunnel.TunnelStatus, counters countersOf, asJSON bool) int {
	var err error
	if asJSON {
		err = writeShowJSON(os.Stdout, nil, nil, []ovpntunnel.TunnelStatus{t})
	} else {
		err = ovpntunnel.FormatStatusCounters(os.Stdout, []ovpntunnel.TunnelStatus{t}, counters.ovpn())
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
func writeShowJSON(w io.Writer, devs []*wgtypes.Device, names map[wgtypes.Key]string, ovpns []ovpntunnel.TunnelStatus) error {
	doc := showDocument{
		ShowJSON: wgquick.ShowJSON{Schema: wgquick.ShowJSONSchema, Interfaces: []wgquick.InterfaceJSON{}},
		OpenVPN:  append([]ovpntunnel.TunnelStatus{}, ovpns...),
	}
	for _, d := range devs {
		doc.Interfaces = append(doc.Interfaces, wgquick.DeviceJSONNamed(d, names))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
