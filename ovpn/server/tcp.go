package server

// The TCP transport: one connection, one reader goroutine and one client.
// Packets are framed by wire.TCPReader and wire.TCPWriter; there is no stateless cookie (the
// TCP handshake already proved the address).
//
//	connection (buffered frames) -> data opcode -> handleData
//	       -> decrypted packets for the host, with a TUN device attached:
//	          copied into this reader's TUN batch, one device write per run
//	          of frames already read (flushed before a read may wait; no
//	          queue, no goroutine hand-off), as on UDP
//	       -> without one: the rx queue -> ReadPacket(s)
//	       -> control -> control.Channel.HandlePacket

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/rawstream"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/tun"
)

// acceptTCP accepts TCP clients.
func (s *Server) acceptTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			s.log.Error("accept", "err", err)
			return
		}
		src := remoteAddrPort(c).Addr()
		if !s.tcpGate.admit(src) {
			s.stats.TCPRefused.Add(1)
			s.stats.FailedHandshakes.add(FailRateLimit)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.serveTCP(c)
	}
}

// serveTCP runs one TCP client: the first packet must be its reset.
func (s *Server) serveTCP(c net.Conn) {
	defer s.wg.Done()
	from := remoteAddrPort(c)
	c.SetReadDeadline(time.Now().Add(min(s.handWindow, s.tcpGate.deadline())))
	raw, err := readFirstFrame(c)
	s.tcpGate.release(from.Addr())
	if err != nil {
		c.Close()
		return
	}
	w, err := s.wrapperFor(raw)
	if err != nil {
		if errors.Is(err, errV2Metadata) {
			s.log.Warn("session refused", "remote", from, "err", err)
		} else {
			s.stats.BadControl.Add(1)
			s.resetRefused(raw)
		}
		c.Close()
		return
	}
	plain, err := w.Unwrap(nil, raw)
	if err != nil {
		s.resetRefused(raw)
	}
	var p wire.ControlPacket
	if err == nil {
		err = wire.DecodeControl(plain, &p)
	}
	if err != nil || p.Op != wire.HardResetClientV2 || p.KeyID != 0 {
		s.stats.BadControl.Add(1)
		c.Close()
		return
	}
	var local wire.SessionID
	if _, err := rand.Read(local[:]); err != nil {
		c.Close()
		return
	}
	rs := rawstream.New(c)
	peer, err := s.newPeer(from, local, p.Session, w, &tcpTransport{c: c, w: wire.NewTCPWriter(rs)}, false)
	if err != nil {
		s.log.Warn("session refused", "remote", from, "err", err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	r := wire.NewTCPReader(rs, 64<<10, maxPkt, data.Tailroom)
	// This connection's batch for the attached device, as the UDP reader
	// has: decrypted packets are written to the device by this goroutine,
	// once per run of frames the read buffer holds (before a read may
	// wait), with no queue and no hand-off to the TUN writer goroutine.
	var sink *tun.BatchWriter
	defer func() {
		if sink != nil {
			s.flushTUN(sink)
		}
	}()
	for {
		if !r.Ready() {
			if sink != nil {
				s.flushTUN(sink)
			}
			sink = s.sinkFor(sink)
		}
		raw, err := r.Next()
		if err != nil {
			peer.close(fmt.Sprintf("connection closed: %v", err))
			return
		}
		op, _ := wire.Header(raw[0])
		if op.IsData() {
			s.handleData(peer, raw, sink)
			continue
		}
		if err := peer.ctrl.HandlePacket(raw); err != nil {
			if errors.Is(err, control.ErrNewSession) {
				peer.close("the client started a new session")
				return
			}
			s.stats.BadControl.Add(1)
			continue
		}
		peer.touch()
	}
}

// remoteAddrPort is c's peer address, IPv4-mapped addresses unmapped.
func remoteAddrPort(c net.Conn) netip.AddrPort {
	a, _ := c.RemoteAddr().(*net.TCPAddr)
	if a == nil {
		return netip.AddrPort{}
	}
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// tcpTransport sends through wire's TCP framer, over raw writes of the
// connection (rawstream).
type tcpTransport struct {
	c net.Conn
	w *wire.TCPWriter // over rawstream.New(c)
}

func (t *tcpTransport) send(buf []byte, off, n int) error { return t.w.Write(buf, off, n) }

func (t *tcpTransport) close() { t.c.Close() }

func (t *tcpTransport) name() string { return "TCPv4_SERVER" }
