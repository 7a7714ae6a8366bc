package device

// The established peer's data path during a handshake flood, over real
// loopback UDP: a Wirelane device on the production bind whose session
// with the flooded responder is up before the flood starts, sending
// numbered packets through it at a steady pace while the flood and the
// legitimate handshakes run; the responder's TUN side tallies what arrives
// (in order, duplicated, missing). Used by TestHandshakeUnderFloodUDP and
// BenchmarkHandshakeUnderFlood, against Wirelane and wireguard-go alike.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// The stream's packets: an IPv4 UDP packet from streamSrc to streamDst
// whose payload starts with a magic and, for a numbered packet, its
// sequence number (big-endian), padded to streamPayload bytes.
var (
	streamSrc = netip.MustParseAddr("10.8.0.1")
	streamDst = netip.MustParseAddr("10.9.0.254")
)

const (
	streamPayload  = 1000
	streamInterval = time.Millisecond // one packet a millisecond
	magicData      = "FLDDATA1"
	magicProbe     = "FLDPROBE"
)

// seqTally counts the stream's numbered packets as the responder's TUN
// receives them.
type seqTally struct {
	mu        sync.Mutex
	seen      []bool // by sequence number
	delivered int64  // distinct numbered packets
	dups      int64  // numbered packets seen before
	reordered int64  // numbered packets that came after a higher one
	next      int64  // one past the highest sequence number seen
	probes    int64  // probe packets (establish)
}

// note tallies one IPv4 packet written to the responder's TUN; others
// are ignored.
func (t *seqTally) note(pkt []byte) {
	if len(pkt) < 28+16 || pkt[0]>>4 != 4 {
		return
	}
	pl := pkt[28:]
	t.mu.Lock()
	defer t.mu.Unlock()
	switch string(pl[:8]) {
	case magicProbe:
		t.probes++
	case magicData:
		seq := int64(binary.BigEndian.Uint64(pl[8:16]))
		if seq < 0 || seq > 1<<24 {
			return
		}
		for int64(len(t.seen)) <= seq {
			t.seen = append(t.seen, false)
		}
		switch {
		case t.seen[seq]:
			t.dups++
			return
		case seq < t.next:
			t.reordered++
		default:
			t.next = seq + 1
		}
		t.seen[seq] = true
		t.delivered++
	}
}

func (t *seqTally) counts() (delivered, dups, reordered, probes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.delivered, t.dups, t.reordered, t.probes
}

// floodStream is the established peer: a Wirelane device on the
// production bind with a memtun, whose one peer is the responder.
type floodStream struct {
	dev  *Device
	tun  *memtun.Device
	key  noise.PrivateKey
	sent atomic.Int64 // numbered packets injected into its TUN
	stop chan struct{}
	done chan struct{}
}

// newFloodStream makes the established peer of the responder pub at ep
// (not yet established: the responder must be given peerConfig or
// refConfig first, then establish).
func newFloodStream(tb testing.TB, pub noise.PublicKey, ep netip.AddrPort) *floodStream {
	s := &floodStream{tun: memtun.New("floodata", 1420), key: mustKey(tb)}
	s.dev = NewDevice(s.tun, conn.NewStdBind(), Options{})
	tb.Cleanup(s.dev.Close)
	if err := s.dev.Up(); err != nil {
		tb.Fatal(err)
	}
	must(tb, s.dev.Configure(&Config{PrivateKey: ptr(s.key), Peers: []PeerConfig{{
		PublicKey: pub, Endpoint: &ep, AllowedIPs: prefixes("10.9.0.0/24"),
	}}}))
	return s
}

// peerConfig is the stream's peer for a Wirelane responder.
func (s *floodStream) peerConfig() PeerConfig {
	return PeerConfig{PublicKey: s.key.PublicKey(), AllowedIPs: prefixes(streamSrc.String() + "/32")}
}

// refConfig is the stream's peer for a wireguard-go responder (IpcSet).
func (s *floodStream) refConfig() string {
	pub := s.key.PublicKey()
	return fmt.Sprintf("public_key=%s\nallowed_ip=%s/32\n", hex.EncodeToString(pub[:]), streamSrc)
}

func streamPacket(magic string, seq int64) []byte {
	pl := make([]byte, streamPayload)
	copy(pl, magic)
	binary.BigEndian.PutUint64(pl[8:], uint64(seq))
	return ipPacket(streamSrc, streamDst, pl)
}

// establish sends probes until one reaches the responder's TUN (the
// session is up and confirmed on the responder's side).
func (s *floodStream) establish(tb testing.TB, t *seqTally) {
	tb.Helper()
	_, _, _, p0 := t.counts()
	deadline := time.Now().Add(10 * time.Second)
	for {
		must(tb, s.tun.Inject(streamPacket(magicProbe, 0)))
		for until := time.Now().Add(200 * time.Millisecond); time.Now().Before(until); time.Sleep(time.Millisecond) {
			if _, _, _, p := t.counts(); p > p0 {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("the established peer's session did not come up")
		}
	}
}

// start sends numbered packets, one every streamInterval (at most 20
// behind when not scheduled), numbered on from where the last run
// stopped, until halt.
func (s *floodStream) start() {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		next := time.Now()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			now := time.Now()
			if now.Sub(next) > 20*streamInterval {
				next = now.Add(-20 * streamInterval)
			}
			for !next.After(now) {
				if s.tun.Inject(streamPacket(magicData, s.sent.Load())) != nil {
					return
				}
				s.sent.Add(1)
				next = next.Add(streamInterval)
			}
			time.Sleep(time.Until(next))
		}
	}()
}

// halt stops the sender and waits until the responder's TUN has every
// packet sent, for at most 5 s (a loaded machine may hold the last ones
// up; a packet still missing then is lost).
func (s *floodStream) halt(t *seqTally) {
	close(s.stop)
	<-s.done
	sent := s.sent.Load()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if d, _, _, _ := t.counts(); d >= sent {
			return
		}
	}
}

// streamResult is what one responder's TUN got of the stream during a
// flood.
type streamResult struct {
	sent, delivered, dups, reordered int64
	kdrops                           uint64 // datagrams the kernel dropped at the responder's socket meanwhile
}

func (r streamResult) lost() int64 { return r.sent - r.delivered }

func (r streamResult) String() string {
	return fmt.Sprintf("sent %d, delivered %d, lost %d, duplicates %d, reordered %d (kernel drops at the responder's socket meanwhile, flood included: %d)",
		r.sent, r.delivered, r.lost(), r.dups, r.reordered, r.kdrops)
}

// transportDrops lists the drop counters that moved between c0 and c1 for
// reasons other than the handshake queue and the stale-handshake drop
// (those apply to handshake messages only), with the socket's receive
// errors and the TUN's write errors: everything by which the receive path
// could lose an established peer's data.
func transportDrops(c0, c1 Counters) string {
	var out []string
	for r := DropReason(0); r < numDropReasons; r++ {
		if r == DropHandshakeQueue || r == DropHandshakeStale {
			continue
		}
		if d := c1.Dropped[r] - c0.Dropped[r]; d != 0 {
			out = append(out, fmt.Sprintf("%s %d", r, d))
		}
	}
	if d := c1.SocketReceiveErrors - c0.SocketReceiveErrors; d != 0 {
		out = append(out, fmt.Sprintf("socket receive errors %d", d))
	}
	if d := c1.TUNWriteErrors - c0.TUNWriteErrors; d != 0 {
		out = append(out, fmt.Sprintf("TUN write errors %d", d))
	}
	return strings.Join(out, ", ")
}

// newFloodRef is a wireguard-go responder on its default bind whose TUN
// hands every packet it is given to tally (the test's side drops
// nothing, unlike newRefPeer's bounded channel).
func newFloodRef(tb testing.TB, tally *seqTally) *refPeer {
	tb.Helper()
	r := &refPeer{tun: tuntest.NewChannelTUN(), key: mustKey(tb)}
	r.dev = wgdevice.NewDevice(r.tun.TUN(), wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case p := <-r.tun.Inbound:
				tally.note(p)
			case <-done:
				return
			}
		}
	}()
	tb.Cleanup(func() { r.dev.Close(); close(done) })
	r.up(tb)
	return r
}
