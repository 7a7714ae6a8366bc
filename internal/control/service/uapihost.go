package service

// UAPIHost reads the WireGuard daemons that already run on the machine
// (`wirelaned IFNAME`, wireguard-go) through their UAPI sockets:
//
//	Dir/*.sock -> one "get=1" per socket (parseGet) -> Tunnel
//
// It shows them and their counters; it cannot start, stop, import or
// delete (ErrUnsupported): that is the tunnel library's Host. A socket that
// does not answer is a daemon that has gone, and is not listed.

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
)

// UAPIHost is a read-only Host over the UAPI sockets in a directory.
type UAPIHost struct {
	dir      string        // immutable
	interval time.Duration // how often Watch looks for daemons; immutable
	timeout  time.Duration // one get=1; immutable

	mu      sync.Mutex
	publish func(Event)     // guarded by mu; nil before Watch and after stop
	known   map[string]bool // daemons seen at the last look; guarded by mu
}

// NewUAPIHost returns a Host over the sockets in dir ("" = uapi.SocketDir,
// /var/run/wireguard).
func NewUAPIHost(dir string) *UAPIHost {
	if dir == "" {
		dir = uapi.SocketDir
	}
	return &UAPIHost{dir: dir, interval: time.Second, timeout: 2 * time.Second, known: map[string]bool{}}
}

// names returns the interface names of the sockets in the directory.
func (h *UAPIHost) names() []string {
	des, err := os.ReadDir(h.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".sock")
		if ok && ValidName(name) && de.Type() == os.ModeSocket {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// List returns every daemon that answers, sorted by name.
func (h *UAPIHost) List() []Tunnel {
	var out []Tunnel
	for _, n := range h.names() {
		if t, ok := h.Get(n); ok {
			out = append(out, t)
		}
	}
	return out
}

// Get asks one daemon for its state.
func (h *UAPIHost) Get(name string) (Tunnel, bool) {
	if !ValidName(name) {
		return Tunnel{}, false
	}
	t, err := h.query(name)
	if err != nil {
		return Tunnel{}, false
	}
	return t, true
}

func (h *UAPIHost) query(name string) (Tunnel, error) {
	c, err := net.DialTimeout("unix", filepath.Join(h.dir, name+".sock"), h.timeout)
	if err != nil {
		return Tunnel{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(h.timeout))
	if _, err := io.WriteString(c, "get=1\n\n"); err != nil {
		return Tunnel{}, err
	}
	t, err := parseGet(io.LimitReader(c, maxGetAnswer))
	if err != nil {
		return Tunnel{}, fmt.Errorf("%s: %w", name, err)
	}
	t.Name, t.Kind, t.State = name, KindWireGuard, StateUp
	t.Addresses = interfaceAddrs(name)
	return t, nil
}

// maxGetAnswer bounds one daemon's answer (a million allowed IPs fit).
const maxGetAnswer = 64 << 20

// interfaceAddrs returns the addresses of a network interface (none when
// it does not exist here, for example in another namespace).
func interfaceAddrs(name string) []netip.Prefix {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if in, ok := a.(*net.IPNet); ok {
			ip, ok := netip.AddrFromSlice(in.IP)
			ones, _ := in.Mask.Size()
			if ok {
				out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
			}
		}
	}
	return out
}

// parseGet reads a get=1 answer up to its blank line. The private key is
// read only to derive the public key and is not kept; preshared keys are
// skipped. Unknown keys are ignored (newer daemons may add some).
func parseGet(r io.Reader) (Tunnel, error) {
	var t Tunnel
	br := bufio.NewReaderSize(r, 4096)
	var peer *Peer
	var hsSec, hsNsec int64
	endPeer := func() {
		if peer == nil {
			return
		}
		if hsSec != 0 || hsNsec != 0 {
			at := time.Unix(hsSec, hsNsec).UTC()
			peer.LatestHandshake = &at
		}
		t.RxBytes += peer.RxBytes
		t.TxBytes += peer.TxBytes
		t.Peers = append(t.Peers, *peer)
		peer, hsSec, hsNsec = nil, 0, 0
	}
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return t, fmt.Errorf("uapi answer line %d is too long", lineNo)
		}
		if err != nil {
			return t, fmt.Errorf("uapi answer ended before its blank line: %w", err)
		}
		line = line[:len(line)-1]
		if len(line) == 0 {
			return t, fmt.Errorf("uapi answer without errno")
		}
		k, v, ok := strings.Cut(string(line), "=")
		if !ok {
			return t, fmt.Errorf("uapi answer line %d has no '='", lineNo)
		}
		bad := func() (Tunnel, error) {
			return Tunnel{}, fmt.Errorf("uapi answer line %d: invalid %s", lineNo, k)
		}
		switch k {
		case "errno":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return bad()
			}
			if n != 0 {
				return Tunnel{}, fmt.Errorf("the daemon answered errno %d", n)
			}
			endPeer()
			// The blank line that ends the answer.
			if rest, err := br.ReadSlice('\n'); err != nil || len(rest) != 1 {
				return Tunnel{}, fmt.Errorf("uapi answer: no blank line after errno")
			}
			return t, nil
		case "private_key":
			if peer != nil {
				return bad()
			}
			var priv noise.PrivateKey
			if len(v) != 64 {
				return bad()
			}
			if _, err := hex.Decode(priv[:], []byte(v)); err != nil {
				return bad()
			}
			t.PublicKey = priv.PublicKey().String()
			clear(priv[:])
		case "fwmark":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return bad()
			}
			t.FwMark = uint32(n)
		case "listen_port":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return bad()
			}
			t.ListenPort = uint16(n)
		case "public_key":
			endPeer()
			var pub noise.PublicKey
			if len(v) != 64 {
				return bad()
			}
			if _, err := hex.Decode(pub[:], []byte(v)); err != nil {
				return bad()
			}
			peer = &Peer{PublicKey: pub.String()}
		case "endpoint", "last_handshake_time_sec", "last_handshake_time_nsec", "tx_bytes", "rx_bytes", "allowed_ip", "preshared_key", "persistent_keepalive_interval":
			if peer == nil {
				return bad()
			}
			switch k {
			case "preshared_key":
				// Only whether there is one: the key is not kept.
				peer.HasPresharedKey = strings.Trim(v, "0") != ""
			case "persistent_keepalive_interval":
				n, err := strconv.ParseUint(v, 10, 16)
				if err != nil {
					return bad()
				}
				peer.PersistentKeepalive = int(n)
			case "endpoint":
				ap, err := netip.ParseAddrPort(v)
				if err != nil {
					return bad()
				}
				ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
				peer.Endpoint = &ap
			case "last_handshake_time_sec", "last_handshake_time_nsec":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 || n > 1<<40 {
					return bad()
				}
				if k == "last_handshake_time_sec" {
					hsSec = n
				} else {
					hsNsec = n
				}
			case "tx_bytes", "rx_bytes":
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return bad()
				}
				if k == "tx_bytes" {
					peer.TxBytes = n
				} else {
					peer.RxBytes = n
				}
			case "allowed_ip":
				p, err := netip.ParsePrefix(v)
				if err != nil {
					return bad()
				}
				peer.AllowedIPs = append(peer.AllowedIPs, p.Masked())
			}
		}
		// protocol_version and unknown keys: not shown.
	}
}

// Up is not supported: a UAPI daemon is started by wg-quick or the CLI.
func (h *UAPIHost) Up(ctx context.Context, name string) error {
	return h.unsupported(name, "bringing tunnels up")
}

// Down is not supported (see Up).
func (h *UAPIHost) Down(ctx context.Context, name string) error {
	return h.unsupported(name, "bringing tunnels down")
}

// Import is not supported: the UAPI host keeps no configuration files.
func (h *UAPIHost) Import(ctx context.Context, req ImportRequest) error {
	return fmt.Errorf("importing tunnels: %w", ErrUnsupported)
}

// Delete is not supported (see Import).
func (h *UAPIHost) Delete(ctx context.Context, name string) error {
	return h.unsupported(name, "deleting tunnels")
}

func (h *UAPIHost) unsupported(name, what string) error {
	if _, ok := h.Get(name); !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	return fmt.Errorf("%s (the daemons are read through their UAPI sockets only): %w", what, ErrUnsupported)
}

// Watch looks for daemons every second and publishes a tunnels event and a
// tunnel event (up or down) for each one that comes or goes.
func (h *UAPIHost) Watch(publish func(Event)) func() {
	h.mu.Lock()
	h.publish = publish
	for _, t := range h.List() {
		h.known[t.Name] = true
	}
	h.mu.Unlock()
	return Periodic(h.interval, h.look, func() {
		h.mu.Lock()
		h.publish = nil
		h.mu.Unlock()
	})
}

// look compares the daemons that answer with those seen last time.
func (h *UAPIHost) look() {
	now := map[string]Tunnel{}
	for _, t := range h.List() {
		now[t.Name] = t
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.publish == nil {
		return
	}
	for name, t := range now {
		if !h.known[name] {
			h.known[name] = true
			tc := t
			h.publish(Event{Type: EventTunnels, Tunnel: name, Change: ChangeAdded, Status: &tc})
			h.publish(Event{Type: EventTunnel, Tunnel: name, State: StateUp, Reason: "its daemon started", Status: &tc})
		}
	}
	for name := range h.known {
		if _, ok := now[name]; !ok {
			delete(h.known, name)
			h.publish(Event{Type: EventTunnel, Tunnel: name, State: StateDown, Reason: "its daemon stopped"})
			h.publish(Event{Type: EventTunnels, Tunnel: name, Change: ChangeRemoved})
		}
	}
}
