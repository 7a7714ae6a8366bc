package rekeysoak

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stream is numbered UDP traffic both ways between two tunnel addresses,
// for soaks through real daemons: each side sends a datagram every
// interval to the other, each datagram with its direction and its own
// 32-bit number, and each side counts what it receives once per number in
// a bitset (so that the bookkeeping does not grow with the run). Loss,
// duplicates and strays are what the tunnel did to the traffic.
type Stream struct {
	conns [2]*net.UDPConn // [0] at A, [1] at B
	peers [2]netip.AddrPort
	stop  chan struct{}
	wg    sync.WaitGroup // senders
	rwg   sync.WaitGroup // receivers
	dirs  [2]streamDir   // [0]: A to B, [1]: B to A
}

type streamDir struct {
	sent      atomic.Int64
	sendErrs  atomic.Int64
	lastErr   atomic.Pointer[error]
	mu        sync.Mutex
	got       []uint64
	delivered int64
	dups      int64
	strays    int64
}

// StreamCounts is one direction's tally.
type StreamCounts struct {
	Sent, Delivered int64
	// Duplicates counts datagrams received again; Strays those that were
	// not the stream's (wrong direction or malformed).
	Duplicates, Strays int64
	// SendErrors counts sends that failed (not counted as sent); LastErr
	// is the last of them.
	SendErrors int64
	LastErr    error
}

// Lost is how many sent datagrams did not arrive.
func (c StreamCounts) Lost() int64 { return c.Sent - c.Delivered }

// String summarises the counts.
func (c StreamCounts) String() string {
	s := fmt.Sprintf("%d sent, %d delivered, %d lost, %d duplicated, %d strays, %d send errors", c.Sent, c.Delivered, c.Lost(), c.Duplicates, c.Strays, c.SendErrors)
	if c.LastErr != nil {
		s += fmt.Sprintf(" (last: %v)", c.LastErr)
	}
	return s
}

// Stream directions.
const (
	AToB = 0
	BToA = 1
)

const streamMagic = 0x534f414b // "SOAK"

// StartStream binds a at A and b at B (port 0: any) (inA and inB, when set, create the
// socket inside another network namespace: testnet.InNamespace) and
// starts sending every interval both ways, until Stop.
func StartStream(a, b netip.AddrPort, inA, inB func(func()) error, interval time.Duration) (*Stream, error) {
	s := &Stream{stop: make(chan struct{})}
	for i, side := range []struct {
		addr netip.AddrPort
		in   func(func()) error
	}{{a, inA}, {b, inB}} {
		var err error
		open := func() { s.conns[i], err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(side.addr)) }
		if side.in != nil {
			if werr := side.in(open); werr != nil {
				err = werr
			}
		} else {
			open()
		}
		if err != nil {
			s.closeConns()
			return nil, fmt.Errorf("stream socket at %v: %w", side.addr, err)
		}
		_ = s.conns[i].SetReadBuffer(4 << 20)
	}
	// Each side sends to where the other is bound (port 0: the one chosen).
	s.peers = [2]netip.AddrPort{s.conns[1].LocalAddr().(*net.UDPAddr).AddrPort(), s.conns[0].LocalAddr().(*net.UDPAddr).AddrPort()}
	for dir := range s.dirs {
		s.wg.Add(1)
		go s.send(dir, interval)
		s.rwg.Add(1)
		go s.receive(1 - dir) // dir arrives at the other side
	}
	return s, nil
}

func (s *Stream) closeConns() {
	for _, c := range s.conns {
		if c != nil {
			c.Close()
		}
	}
}

// send sends direction dir's datagrams from its side's socket.
func (s *Stream) send(dir int, interval time.Duration) {
	defer s.wg.Done()
	c, to, d := s.conns[dir], net.UDPAddrFromAddrPort(s.peers[dir]), &s.dirs[dir]
	tick := time.NewTicker(interval)
	defer tick.Stop()
	buf := make([]byte, 200)
	binary.BigEndian.PutUint32(buf[0:4], streamMagic)
	buf[4] = byte(dir)
	for i := uint32(0); ; {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		binary.BigEndian.PutUint32(buf[5:9], i)
		if _, err := c.WriteToUDP(buf, to); err != nil {
			d.sendErrs.Add(1)
			d.lastErr.Store(&err)
			continue // the number is reused: only sent datagrams count
		}
		d.sent.Add(1)
		i++
	}
}

// receive counts, on side's socket, what the other side sent (direction
// 1-side).
func (s *Stream) receive(side int) {
	defer s.rwg.Done()
	dir := 1 - side
	d := &s.dirs[dir]
	buf := make([]byte, 2048)
	for {
		n, err := s.conns[side].Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d.mu.Lock()
		if n < 9 || binary.BigEndian.Uint32(buf[0:4]) != streamMagic || int(buf[4]) != dir {
			d.strays++
			d.mu.Unlock()
			continue
		}
		i := int(binary.BigEndian.Uint32(buf[5:9]))
		for len(d.got) <= i/64 {
			d.got = append(d.got, 0)
		}
		if d.got[i/64]&(1<<(i%64)) != 0 {
			d.dups++
		} else {
			d.got[i/64] |= 1 << (i % 64)
			d.delivered++
		}
		d.mu.Unlock()
	}
}

// Stop ends the sending; what is in flight is still counted until Close.
func (s *Stream) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
}

// Close stops the stream and closes its sockets.
func (s *Stream) Close() {
	s.Stop()
	s.closeConns()
	s.rwg.Wait()
}

// Counts returns direction dir's tally so far.
func (s *Stream) Counts(dir int) StreamCounts {
	d := &s.dirs[dir]
	d.mu.Lock()
	c := StreamCounts{Delivered: d.delivered, Duplicates: d.dups, Strays: d.strays}
	d.mu.Unlock()
	c.Sent, c.SendErrors = d.sent.Load(), d.sendErrs.Load()
	if e := d.lastErr.Load(); e != nil {
		c.LastErr = *e
	}
	return c
}

// SoakRekeys is the number of rekeys a soak runs: the SOAK_REKEYS
// environment variable (scripts/soak.sh sets 200), or def (CI's).
func SoakRekeys(def int) int {
	if v, err := strconv.Atoi(os.Getenv("SOAK_REKEYS")); err == nil && v > 0 {
		return v
	}
	return def
}
