package server

// Stateless session ids for the UDP server (OpenVPN 2.6 behaviour).
//
// A client's HARD_RESET_CLIENT_V2 is answered without creating any state:
// the server's session id is an HMAC over the client's address, its
// session id and a coarse time slot. The server creates the client only
// when a later packet acknowledges that reset and names the session id
// back, which a spoofed source address cannot do.
//
//	reset from A (sid C)  -> reply HARD_RESET_SERVER_V2, sid = HMAC(k, slot | A | C)[:8],
//	                         no ack: never more bytes than the reset
//	                         (the session created later acks it)
//	CONTROL_V1/ACK_V1 from A acking id 0 to sid S
//	                      -> S == HMAC(k, slot or slot-1 | A | C)? create the client : drop

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

// cookieJar computes and checks stateless server session ids. It is
// immutable after newCookieJar and safe for concurrent use.
type cookieJar struct {
	key  [32]byte      // random per server run; never logged
	slot time.Duration // validity slot (half the hand-window)
}

func newCookieJar(handWindow time.Duration) (*cookieJar, error) {
	j := &cookieJar{slot: max(handWindow/2, time.Second)}
	if _, err := rand.Read(j.key[:]); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *cookieJar) at(from netip.AddrPort, client wire.SessionID, slot int64) wire.SessionID {
	m := hmac.New(sha256.New, j.key[:])
	var b [8 + 16 + 2 + 8]byte
	binary.BigEndian.PutUint64(b[:8], uint64(slot))
	a := from.Addr().Unmap().As16()
	copy(b[8:24], a[:])
	binary.BigEndian.PutUint16(b[24:26], from.Port())
	copy(b[26:], client[:])
	m.Write(b[:])
	var sid wire.SessionID
	copy(sid[:], m.Sum(nil))
	return sid
}

// sessionID returns the server session id for a reset from client at now.
func (j *cookieJar) sessionID(from netip.AddrPort, client wire.SessionID, now time.Time) wire.SessionID {
	return j.at(from, client, now.UnixNano()/int64(j.slot))
}

// valid reports whether sid was handed out to (from, client) in the
// current or the previous slot.
func (j *cookieJar) valid(from netip.AddrPort, client, sid wire.SessionID, now time.Time) bool {
	s := now.UnixNano() / int64(j.slot)
	for _, slot := range []int64{s, s - 1} {
		want := j.at(from, client, slot)
		if hmac.Equal(want[:], sid[:]) {
			return true
		}
	}
	return false
}

// The stateless reply to a reset goes to an address nobody has verified.
// It is never larger than the reset (udpUnknown leaves the ack out), and
// the budget below keeps the server from being a useful reflector even
// so: each source address gets at most replyBudgetPerSec replies a
// second, and when more sources than replyBudgetSources ask within one
// second the rest get none.
const (
	replyBudgetPerSec  = 32
	replyBudgetSources = 1 << 16
)

// replyBudget counts stateless replies per source address in the
// current second.
type replyBudget struct {
	mu     sync.Mutex            // guards the fields below
	second int64                 // the unix second n counts
	n      map[netip.Addr]uint16 // replies sent this second, by source
}

// allow reports whether a stateless reply may go to a at now, and
// counts it.
func (b *replyBudget) allow(a netip.Addr, now time.Time) bool {
	sec := now.Unix()
	b.mu.Lock()
	defer b.mu.Unlock()
	if sec != b.second || b.n == nil {
		b.second = sec
		clear(b.n)
		if b.n == nil {
			b.n = map[netip.Addr]uint16{}
		}
	}
	c, ok := b.n[a]
	if (!ok && len(b.n) >= replyBudgetSources) || c >= replyBudgetPerSec {
		return false
	}
	b.n[a] = c + 1
	return true
}
