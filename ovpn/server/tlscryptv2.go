package server

// tls-crypt-v2 on the server: each client's reset carries its own
// tls-crypt key wrapped by the server key (WKc). Over UDP the server
// keeps no state until the client proves it received the server's reply
// (OpenVPN 2.6's HMAC cookie with early negotiation):
//
//	HARD_RESET_CLIENT_V3 || WKc from A (sid C), packet id from EARLY_NEG_START
//	    -> unwrap WKc (server key) -> Kc -> tls-crypt check with Kc
//	    -> reply HARD_RESET_SERVER_V2 under Kc, sid = cookie(A, C), payload
//	       the flags TLV "resend WKc"; nothing kept
//	CONTROL_WKC_V1 || WKc from A acking id 0 to the cookie
//	    -> unwrap WKc again -> tls-crypt check -> cookie valid?
//	    -> metadata allowed (tls-crypt-v2-metadata-allow, tls-crypt-v2-max-age)?
//	    -> the client is created with a V2Session wrapper under Kc
//
// Resets without early negotiation (OpenVPN 2.5 and older) would need
// state before any proof and are dropped (Stats.NoCookie). Over TCP the
// first frame's WKc is unwrapped and checked the same way (tcp.go).

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// errV2Metadata is a client key whose metadata the policy refuses.
var errV2Metadata = errors.New("server: tls-crypt-v2 client key refused")

// v2Open unwraps the WKc appended to raw and returns a wrapper under the
// client's key, and the key's metadata.
func (s *Server) v2Open(raw []byte) (*wrap.V2Session, []byte, error) {
	_, wkc, err := wrap.SplitWKc(raw)
	if err != nil {
		return nil, nil, err
	}
	kc, md, err := s.live.Load().cfg.TLSCryptV2Server.UnwrapClientKey(wkc)
	if err != nil {
		return nil, nil, err
	}
	w, err := wrap.NewV2Session(kc, md)
	clear(kc[:])
	return w, md, err
}

// v2Allowed applies tls-crypt-v2-max-age and tls-crypt-v2-metadata-allow
// to a client key's metadata.
func (s *Server) v2Allowed(md []byte, now time.Time) error {
	if days := s.live.Load().cfg.TLSCryptV2MaxAge; days > 0 {
		t, ok := wrap.MetadataTime(md)
		if !ok {
			return fmt.Errorf("%w: tls-crypt-v2-max-age %d, and the key has no timestamp (%s)", errV2Metadata, days, wrap.DescribeMetadata(md))
		}
		if now.Sub(t) > time.Duration(days)*24*time.Hour {
			return fmt.Errorf("%w: generated %s, older than tls-crypt-v2-max-age %d days", errV2Metadata, t.UTC().Format(time.RFC3339), days)
		}
	}
	if s.v2allow != nil {
		ok, err := s.v2allow.allows(md, now)
		if err != nil {
			return fmt.Errorf("%w: %v", errV2Metadata, err)
		}
		if !ok {
			return fmt.Errorf("%w: metadata %s is not in %s", errV2Metadata, wrap.DescribeMetadata(md), s.v2allow.path)
		}
	}
	return nil
}

// udpUnknownV2 is udpUnknown for a tls-crypt-v2 server.
func (s *Server) udpUnknownV2(from netip.AddrPort, raw []byte) {
	op, kid := wire.Header(raw[0])
	if kid != 0 || (op != wire.HardResetClientV3 && op != wire.ControlWKCV1) {
		s.stats.BadControl.Add(1)
		return
	}
	w, md, err := s.v2Open(raw)
	if err != nil {
		s.stats.BadControl.Add(1)
		s.resetRefused(raw)
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
	if err != nil {
		s.stats.BadControl.Add(1)
		return
	}
	now := time.Now()
	if op == wire.HardResetClientV3 {
		if !wrap.EarlyNegotiation(raw) {
			s.stats.NoCookie.Add(1)
			return
		}
		if !s.replies.allow(from.Addr(), now) {
			s.stats.RepliesWithheld.Add(1)
			return
		}
		// A client sends its first reset twice at once (OpenVPN 2.6 does):
		// the replies get ids that never repeat, under the server's start
		// time, so that neither looks like a replay of the other and the
		// session's packets (a later time) pass the client's window.
		w.SendFrom(s.replyIDs.Add(1), s.replyEpoch)
		reply := wire.ControlPacket{Op: wire.HardResetServerV2, Session: s.cookies.sessionID(from, p.Session, now), Payload: wrap.EarlyNegReply()}
		b, err := wire.AppendControl(nil, &reply)
		if err == nil {
			b, err = w.Wrap(nil, b)
		}
		if err == nil {
			_ = s.bind.Send([][]byte{b}, conn.NewRoute(conn.Endpoint{Dst: from}, 0))
		}
		return
	}
	acked := false
	for _, a := range p.AckList() {
		acked = acked || a == 0
	}
	if !acked || !s.cookies.valid(from, p.Session, p.Remote, now) || s.buried(from, p.Session, now) {
		s.stats.BadControl.Add(1)
		return
	}
	if err := s.v2Allowed(md, now); err != nil {
		s.stats.KeyRefused.Add(1)
		s.stats.FailedHandshakes.add(FailKeyRefused)
		s.log.Warn("session refused", "remote", from, "err", err)
		return
	}
	// A fresh wrapper for the client (HandlePacket checks raw again),
	// sending under a time later than the stateless replies'.
	pw, _, err := s.v2Open(raw)
	if err != nil {
		return
	}
	pw.SendFrom(1, s.sessionEpoch(now))
	peer, err := s.newPeer(from, p.Remote, p.Session, pw, nil, true)
	if err != nil {
		s.log.Warn("session refused", "remote", from, "err", err)
		return
	}
	if err := peer.ctrl.HandlePacket(raw); err != nil {
		s.stats.BadControl.Add(1)
	}
	peer.touch()
}

// sessionEpoch is the replay time a new UDP session's wrapper sends
// under: later than the stateless replies' (replyEpoch).
func (s *Server) sessionEpoch(now time.Time) uint32 {
	return max(uint32(now.Unix()), s.replyEpoch+1)
}

// wrapperFor returns the wrapper of a TCP client whose first frame is
// raw: under tls-crypt-v2 the client's own, from the frame's WKc, after
// the metadata checks; otherwise the server's.
func (s *Server) wrapperFor(raw []byte) (wrap.Wrapper, error) {
	if s.live.Load().cfg.TLSCryptV2Server == nil {
		return s.newWrapper()
	}
	if op, _ := wire.Header(raw[0]); op != wire.HardResetClientV3 {
		return nil, fmt.Errorf("server: %v without a tls-crypt-v2 key", op)
	}
	w, md, err := s.v2Open(raw)
	if err != nil {
		return nil, err
	}
	// The key must check before its metadata counts.
	if _, err := w.Unwrap(nil, raw); err != nil {
		return nil, err
	}
	if err := s.v2Allowed(md, time.Now()); err != nil {
		s.stats.KeyRefused.Add(1)
		s.stats.FailedHandshakes.add(FailKeyRefused)
		return nil, err
	}
	w, _, err = s.v2Open(raw) // fresh replay state: the caller unwraps raw again
	return w, err
}

// metadataAllow is the tls-crypt-v2-metadata-allow file: the metadata of
// the client keys the server accepts, one a line. The file is read again
// when its size or modification time changed, at most once a second.
type metadataAllow struct {
	path string // immutable

	mu      sync.Mutex          // guards the fields below
	checked time.Time           // last stat
	size    int64               // of the file last read
	mtime   time.Time           // of the file last read
	allowed map[string]struct{} // raw metadata (type byte first)
	err     error               // from the last read; refuses every key while set
}

func newMetadataAllow(path string) (*metadataAllow, error) {
	a := &metadataAllow{path: path}
	if _, err := a.allows(nil, time.Now()); err != nil {
		return nil, err
	}
	return a, nil
}

// allows reports whether md is listed.
func (a *metadataAllow) allows(md []byte, now time.Time) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == nil || now.Sub(a.checked) >= time.Second {
		a.checked = now
		fi, err := os.Stat(a.path)
		switch {
		case err != nil:
			a.err = err
		case a.allowed == nil || a.err != nil || fi.Size() != a.size || !fi.ModTime().Equal(a.mtime):
			b, err := os.ReadFile(a.path)
			if err == nil {
				var m map[string]struct{}
				if m, err = ParseMetadataAllow(b, a.path); err == nil {
					a.allowed, a.size, a.mtime = m, fi.Size(), fi.ModTime()
				}
			}
			a.err = err
		}
	}
	if a.err != nil {
		return false, a.err
	}
	_, ok := a.allowed[string(md)]
	return ok, nil
}

// ParseMetadataAllow parses a tls-crypt-v2-metadata-allow file: one
// client key's user metadata a line, in base64 as given to `openvpn
// --genkey tls-crypt-v2-client FILE METADATA` or `wirelane ovpn genkey
// tls-crypt-v2-client --metadata`; blank lines and # comments skipped.
// The map's keys are the raw metadata (type byte first). Errors name
// name:line.
func ParseMetadataAllow(text []byte, name string) (map[string]struct{}, error) {
	m := map[string]struct{}{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		l, _, _ = strings.Cut(l, " ") // a comment after the value
		if _, err := base64.StdEncoding.DecodeString(l); err != nil {
			return nil, fmt.Errorf("%s:%d: not base64 metadata: %q", name, line, l)
		}
		md, err := wrap.UserMetadata(l)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		m[string(md)] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return m, nil
}
