package uapi

import (
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
)

// fakeHandler is an in-memory device: it records the requests it is given
// and answers get=1 from a fixed state.
type fakeHandler struct {
	mu     sync.Mutex      // guards sets
	sets   []device.Config // requests applied, in order; guarded by mu
	setErr error           // returned by Configure; immutable while serving
	getErr error           // returned by WriteStatus after streaming; immutable while serving

	dev   device.Status // immutable while serving
	peers []fakePeer    // immutable while serving
}

// fakePeer is one peer of the fake device. Its allowed IPs are the fixed
// list followed by gen generated /32 prefixes (so that huge peers cost no
// memory on the handler side).
type fakePeer struct {
	info    device.PeerStatus
	allowed []netip.Prefix
	gen     int
}

// genPrefix returns the i-th generated prefix: 10.x.y.z/32 for i < 2^24.
func genPrefix(i int) netip.Prefix {
	a := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
	return netip.PrefixFrom(netip.AddrFrom4(a), 32)
}

func (h *fakeHandler) WriteStatus(w device.StatusWriter) error {
	if err := w.Device(h.dev); err != nil {
		return err
	}
	for _, p := range h.peers {
		if err := w.Peer(p.info); err != nil {
			return err
		}
		for _, pfx := range p.allowed {
			if err := w.AllowedIP(pfx); err != nil {
				return err
			}
		}
		for i := 0; i < p.gen; i++ {
			if err := w.AllowedIP(genPrefix(i)); err != nil {
				return err
			}
		}
	}
	return h.getErr
}

func (h *fakeHandler) Configure(req *device.Config) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sets = append(h.sets, *req)
	return h.setErr
}

func (h *fakeHandler) applied() []device.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]device.Config(nil), h.sets...)
}

// formatSet writes req back as request lines (without set=1 and without the
// blank line), the inverse of ParseSet for the fuzz round trip.
func formatSet(req *device.Config) string {
	var b strings.Builder
	key := func(name string, k *noise.Key) {
		b.WriteString(name + "=" + string(appendKeyHex(nil, k)) + "\n")
	}
	if req.PrivateKey != nil {
		key("private_key", req.PrivateKey)
	}
	if req.ListenPort != nil {
		b.WriteString("listen_port=" + strconv.Itoa(int(*req.ListenPort)) + "\n")
	}
	if req.FwMark != nil {
		b.WriteString("fwmark=" + strconv.FormatUint(uint64(*req.FwMark), 10) + "\n")
	}
	if req.ReplacePeers {
		b.WriteString("replace_peers=true\n")
	}
	for i := range req.Peers {
		p := &req.Peers[i]
		key("public_key", &p.PublicKey)
		if p.Remove {
			b.WriteString("remove=true\n")
		}
		if p.UpdateOnly {
			b.WriteString("update_only=true\n")
		}
		if p.PresharedKey != nil {
			key("preshared_key", p.PresharedKey)
		}
		if p.Endpoint != nil {
			b.WriteString("endpoint=" + p.Endpoint.String() + "\n")
		}
		if p.PersistentKeepalive != nil {
			b.WriteString("persistent_keepalive_interval=" + strconv.Itoa(int(*p.PersistentKeepalive)) + "\n")
		}
		if p.ReplaceAllowedIPs {
			b.WriteString("replace_allowed_ips=true\n")
		}
		for _, a := range p.AllowedIPs {
			b.WriteString("allowed_ip=")
			if a.Remove {
				b.WriteString("-")
			}
			b.WriteString(a.Prefix.String() + "\n")
		}
	}
	return b.String()
}
