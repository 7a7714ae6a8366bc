package server

// The gate in front of TCP clients: a connection costs a goroutine from
// accept, so connections that have not yet sent their first frame (the
// client's reset) are capped, in all and per source, and get a short
// deadline for that frame. The 64 KiB frame reader comes only after it.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

const (
	// maxTCPUnproven caps connections without a first frame.
	maxTCPUnproven = 256
	// maxTCPUnprovenPerSource caps them per source address (per /64
	// for IPv6, which one host gets whole).
	maxTCPUnprovenPerSource = 8
	// tcpFirstFrameWait is how long a new connection has to deliver its
	// first frame; a real client sends it at once.
	tcpFirstFrameWait = 5 * time.Second
	// maxTCPFirstFrame bounds the first frame (a reset, with a
	// tls-crypt-v2 client key at most about 1.1 KB).
	maxTCPFirstFrame = 2048
)

// tcpGate counts connections that have not sent their first frame.
type tcpGate struct {
	mu    sync.Mutex         // guards the fields below
	total int                // connections admitted and not yet released
	bySrc map[netip.Addr]int // the same per source (see gateSource)
	wait  time.Duration      // first-frame deadline; tcpFirstFrameWait when zero (tests shorten it)
}

// gateSource is the key a source address is counted under.
func gateSource(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// admit counts a new connection from src, or reports false when a cap
// is reached.
func (g *tcpGate) admit(src netip.Addr) bool {
	src = gateSource(src)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= maxTCPUnproven || g.bySrc[src] >= maxTCPUnprovenPerSource {
		return false
	}
	if g.bySrc == nil {
		g.bySrc = map[netip.Addr]int{}
	}
	g.total++
	g.bySrc[src]++
	return true
}

// release forgets a connection admit counted.
func (g *tcpGate) release(src netip.Addr) {
	src = gateSource(src)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.bySrc[src]--; g.bySrc[src] <= 0 {
		delete(g.bySrc, src)
	}
}

func (g *tcpGate) deadline() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait > 0 {
		return g.wait
	}
	return tcpFirstFrameWait
}

// readFirstFrame reads exactly one frame from c, unbuffered (nothing of
// the next frame is consumed), into a buffer of the frame's size.
func readFirstFrame(c net.Conn) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n == 0 || n > maxTCPFirstFrame {
		return nil, fmt.Errorf("first frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	return b, nil
}
