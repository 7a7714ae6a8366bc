package main

// The Wirelane service, seen from the command line: list, show, up and
// down ask it when its socket answers this user (so that every client sees
// every change), and fall back to the files and the daemons' sockets when
// it does not run; events prints its stream.

import (
	"cmp"
	"context"
	"encoding/base64"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// socketEnv names the variable that points the commands at another
// service socket; "off" makes them ignore the service.
const socketEnv = "WIRELANE_SOCKET"

// serviceSocket returns the service's socket path ("" = do not use it).
func serviceSocket() string {
	s := cmp.Or(os.Getenv(socketEnv), service.DefaultSocket)
	if s == "off" {
		return ""
	}
	return s
}

// serviceClient returns a client of the service and its tunnels when the
// service runs and answers this user; nil when it does not (no socket, not
// listening, or this user may not ask it).
func serviceClient() (*client.Client, []service.Tunnel) {
	sock := serviceSocket()
	if sock == "" {
		return nil, nil
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil, nil
	}
	c := client.New(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ts, err := c.List(ctx)
	if err != nil {
		return nil, nil
	}
	return c, ts
}

// isTunnelName reports whether a command's argument is a bare tunnel name
// (not a path): the service knows tunnels by name only.
func isTunnelName(arg string) bool {
	return !strings.Contains(arg, "/") && !strings.HasSuffix(arg, ".conf") && wgquick.ValidInterfaceName(arg)
}

// findTunnel returns the tunnel called name.
func findTunnel(ts []service.Tunnel, name string) (service.Tunnel, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return service.Tunnel{}, false
}

// isWireGuard reports whether t runs a WireGuard device.
func isWireGuard(t *service.Tunnel) bool {
	return t.Kind == service.KindWireGuard || t.Kind == service.KindGateway
}

// standIn marks a key the service does not send (a private or preshared
// key) as set, for the formatters, which print "(hidden)" for it.
var standIn = wgtypes.Key{1}

// deviceOf turns a running WireGuard tunnel of the service into the
// device `show` prints, with its peers' friendly names.
func deviceOf(t *service.Tunnel) (*wgtypes.Device, map[wgtypes.Key]string) {
	d := &wgtypes.Device{Name: cmp.Or(t.Interface, t.Name), ListenPort: int(t.ListenPort), FirewallMark: int(t.FwMark)}
	if k, err := parseKey(t.PublicKey); err == nil {
		d.PublicKey, d.PrivateKey = k, standIn
	}
	names := map[wgtypes.Key]string{}
	for _, p := range t.Peers {
		k, err := parseKey(p.PublicKey)
		if err != nil {
			continue
		}
		wp := wgtypes.Peer{PublicKey: k, ReceiveBytes: int64(p.RxBytes), TransmitBytes: int64(p.TxBytes),
			PersistentKeepaliveInterval: time.Duration(p.PersistentKeepalive) * time.Second}
		if p.HasPresharedKey {
			wp.PresharedKey = standIn
		}
		if p.Endpoint != nil {
			wp.Endpoint = net.UDPAddrFromAddrPort(*p.Endpoint)
		}
		for _, a := range p.AllowedIPs {
			wp.AllowedIPs = append(wp.AllowedIPs, prefixNet(a))
		}
		if p.LatestHandshake != nil {
			wp.LastHandshakeTime = *p.LatestHandshake
		}
		if p.Name != "" {
			names[k] = p.Name
		}
		d.Peers = append(d.Peers, wp)
	}
	return d, names
}

func parseKey(s string) (wgtypes.Key, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return wgtypes.Key{}, err
	}
	return wgtypes.NewKey(b)
}

func prefixNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
