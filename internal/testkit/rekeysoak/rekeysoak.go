// Package rekeysoak is the OpenVPN rekey soak's measuring kit, shared by
// ovpn/server TestRekeySoak (our client and our server) and ovpn/client
// TestE2ERekeySoak (our client and OpenVPN 2.6's server): a UDP relay
// between client and server that reads the key id of every data packet
// on the wire, and ICMP echo traffic with a sequence number per packet.
//
// What the relay holds a sender to, per direction, from OpenVPN's
// key-state rules: data goes under the primary key; after a
// renegotiation the new key's id follows the old one's (1..7, never 0
// again; a renegotiation overlapped by the next may carry no data, so an
// id may be skipped), and the old key (the lame duck) may still be seen
// only within the transition window after the first packet under the new
// one, as the receiver keeps it that long and no longer. A packet under
// any older key, or under the lame duck later, was sent under an expired
// key.
//
// Only tests use it. internal/testkit/e2e TestDaemonRekeySoakOpenVPN puts
// the relay between the real `wirelane ovpn connect` and `serve`
// processes, with UDP traffic (Stream) through their tunnel.
package rekeysoak

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
)

// Direction of a datagram through the relay.
const (
	ClientToServer = 0
	ServerToClient = 1
)

// Report is what the relay saw in one direction.
type Report struct {
	Packets int // data packets
	Rekeys  int // changes of the key id
	// Expired counts data packets under a key that was neither the
	// current one, nor a newer one, nor the lame duck within its window.
	Expired int
	// Skipped counts key ids that never carried data in this direction
	// (a renegotiation overlapped by the next one): not an error.
	Skipped int
	// LateLame is the longest time after a key change that a packet
	// under the lame duck was seen.
	LateLame time.Duration
	// IDs is the sequence of key ids seen (the first 16).
	IDs []uint8
}

type dirState struct {
	started  bool
	cur      uint8
	prev     int // -1: none
	switched time.Time
	r        Report
}

// Relay forwards datagrams between one client and a server, checking the
// key ids of data packets.
type Relay struct {
	window time.Duration
	front  *net.UDPConn // the client's side
	back   *net.UDPConn // connected to the server
	client atomic.Pointer[net.UDPAddr]
	done   chan struct{}
	wg     sync.WaitGroup

	dropEvery      atomic.Int64 // SetDropControlEvery
	control        atomic.Int64
	droppedControl atomic.Int64

	mu   sync.Mutex
	dirs [2]dirState
}

// NewRelay listens on a loopback port and forwards to server; window is
// the transition window the client and the server keep a lame-duck key
// for. wrap, when set, creates the sockets (in another namespace).
func NewRelay(server netip.AddrPort, window time.Duration, wrap func(fn func()) error) (*Relay, error) {
	r := &Relay{window: window, done: make(chan struct{})}
	for i := range r.dirs {
		r.dirs[i].prev = -1
	}
	var err error
	open := func() {
		if r.front, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(server.Addr(), 0))); err != nil {
			return
		}
		r.back, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	}
	if wrap != nil {
		if werr := wrap(open); werr != nil {
			return nil, werr
		}
	} else {
		open()
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	for _, c := range []*net.UDPConn{r.front, r.back} {
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
	}
	r.wg.Add(2)
	go r.run(ClientToServer)
	go r.run(ServerToClient)
	return r, nil
}

// Addr is where the client sends to.
func (r *Relay) Addr() netip.AddrPort { return r.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close stops the relay.
func (r *Relay) Close() {
	select {
	case <-r.done:
		return
	default:
	}
	close(r.done)
	if r.front != nil {
		r.front.Close()
	}
	if r.back != nil {
		r.back.Close()
	}
	r.wg.Wait()
}

func (r *Relay) run(dir int) {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		var n int
		var err error
		if dir == ClientToServer {
			var from *net.UDPAddr
			n, from, err = r.front.ReadFromUDP(buf)
			if err == nil {
				r.client.Store(from)
			}
		} else {
			n, err = r.back.Read(buf)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !r.observe(dir, buf[:n], time.Now()) {
			continue // dropped
		}
		if dir == ClientToServer {
			_, _ = r.back.Write(buf[:n])
		} else if to := r.client.Load(); to != nil {
			_, _ = r.front.WriteToUDP(buf[:n], to)
		}
	}
}

// maxSkip is the most key ids a change may skip and still count as a
// newer key (renegotiations overlapping each other); further ahead in the
// cycle of seven ids is behind.
const maxSkip = 2

// keySteps is how many renegotiations lead from key id from to key id to
// (8 when never: key 0 is only the first exchange's).
func keySteps(from, to uint8) int {
	id := from
	for n := 1; n <= 7; n++ {
		id = nextKeyID(id)
		if id == to {
			return n
		}
	}
	return 8
}

// nextKeyID is the key id a renegotiation after id takes (1..7, then 1).
func nextKeyID(id uint8) uint8 {
	id = (id + 1) & 7
	if id == 0 {
		id = 1
	}
	return id
}

// SetDropControlEvery makes the relay drop every n-th control-channel
// datagram from now on (either direction; 0: none): lost acks and
// key-exchange messages, which the reliability layer must retransmit
// while data keeps flowing under the old key.
func (r *Relay) SetDropControlEvery(n int) { r.dropEvery.Store(int64(n)) }

// DroppedControl is the number of control datagrams dropped on purpose.
func (r *Relay) DroppedControl() int64 { return r.droppedControl.Load() }

// observe checks one datagram's key id, and reports whether to forward it.
func (r *Relay) observe(dir int, pkt []byte, now time.Time) bool {
	if len(pkt) < 1 {
		return true
	}
	op, kid := pkt[0]>>3, pkt[0]&7
	if op != 6 && op != 9 { // P_DATA_V1, P_DATA_V2
		if n := r.dropEvery.Load(); n > 0 && r.control.Add(1)%n == 0 {
			r.droppedControl.Add(1)
			return false
		}
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &r.dirs[dir]
	d.r.Packets++
	switch {
	case !d.started:
		d.started, d.cur, d.switched = true, kid, now
		d.r.IDs = append(d.r.IDs, kid)
	case kid == d.cur:
	case d.prev >= 0 && kid == uint8(d.prev):
		late := now.Sub(d.switched)
		if late > d.r.LateLame {
			d.r.LateLame = late
		}
		if late > r.window {
			d.r.Expired++
		}
	default:
		steps := keySteps(d.cur, kid)
		if steps > maxSkip+1 {
			d.r.Expired++ // behind the current key: an old one
			return true
		}
		d.r.Skipped += steps - 1
		d.prev, d.cur, d.switched = int(d.cur), kid, now
		d.r.Rekeys++
		if len(d.r.IDs) < 16 {
			d.r.IDs = append(d.r.IDs, kid)
		}
	}
	return true
}

// Report returns what the relay saw in direction dir so far.
func (r *Relay) Report(dir int) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.dirs[dir].r
	rep.IDs = append([]uint8(nil), rep.IDs...)
	return rep
}

// Rekeys is the number of key changes seen in both directions (the
// smaller count).
func (r *Relay) Rekeys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return min(r.dirs[0].r.Rekeys, r.dirs[1].r.Rekeys)
}

// String summarises a report.
func (rep Report) String() string {
	return fmt.Sprintf("%d data packets, %d rekeys (ids %v...), %d under an expired key, %d key ids skipped, lame duck seen up to %v after a change",
		rep.Packets, rep.Rekeys, rep.IDs, rep.Expired, rep.Skipped, rep.LateLame.Round(time.Microsecond))
}

// Tunnel is one side of a tunnel the traffic runs over: a client
// session's WritePacket and ReadPacket.
type Tunnel interface {
	WritePacket([]byte) error
	ReadPacket([]byte) (int, error)
}

// Traffic sends ICMP echo requests from src to dst through a tunnel, each
// with its own 32-bit number (the echo id and sequence), and counts the
// replies, once each, in a bitset (so that the bookkeeping does not grow
// the heap the soak measures).
type Traffic struct {
	tun      Tunnel
	src, dst netip.Addr
	sent     atomic.Int64
	mu       sync.Mutex
	got      []uint64
	count    int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

// StartTraffic sends an echo request every interval (and reads replies)
// until Stop.
func StartTraffic(tun Tunnel, src, dst netip.Addr, interval time.Duration) *Traffic {
	t := &Traffic{tun: tun, src: src, dst: dst, stop: make(chan struct{}), got: make([]uint64, 0, 1<<12)}
	t.wg.Add(1)
	go t.send(interval)
	go t.receive()
	return t
}

func (t *Traffic) send(interval time.Duration) {
	defer t.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	payload := make([]byte, 64)
	for i := uint32(0); ; i++ {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		binary.BigEndian.PutUint32(payload, i)
		if err := t.tun.WritePacket(testnet.ICMPEcho(8, t.src, t.dst, uint16(i>>16), uint16(i), payload)); err != nil {
			return
		}
		t.sent.Add(1)
	}
}

func (t *Traffic) receive() {
	buf := make([]byte, 2048)
	for {
		n, err := t.tun.ReadPacket(buf)
		if err != nil {
			return
		}
		p := buf[:n]
		if n < 28+4 || p[9] != 1 || p[20] != 0 || netip.AddrFrom4([4]byte(p[12:16])) != t.dst {
			continue
		}
		i := int(binary.BigEndian.Uint16(p[24:26]))<<16 | int(binary.BigEndian.Uint16(p[26:28]))
		if binary.BigEndian.Uint32(p[28:32]) != uint32(i) {
			continue
		}
		t.mu.Lock()
		for len(t.got) <= i/64 {
			t.got = append(t.got, 0)
		}
		if t.got[i/64]&(1<<(i%64)) == 0 {
			t.got[i/64] |= 1 << (i % 64)
			t.count++
		}
		t.mu.Unlock()
	}
}

// Stop ends the sending (replies are still counted).
func (t *Traffic) Stop() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	t.wg.Wait()
}

// Counts returns the requests sent and the replies received.
func (t *Traffic) Counts() (sent, answered int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent.Load(), t.count
}
