package server

// Stateless session ids for the UDP server (OpenVPN 2.6 behaviour).
//
// A client's HARD_RESET_CLIENT_V2 is answered without creating any state:
// the server's session id is an HMAC over the client's address, its
// session id and a coarse time slot. The server creates the client only
// when a later packet acknowledges that reset and names the session id
// back, which a spoofed source address cannot do.
//
//	reset from A (sid C)  -> reply HARD_RESET_SERVER_V2, sid = HMAC(k, slot | A | C)[:8]
//	CONTROL_V1/ACK_V1 from A acking id 0 to sid S
//	                      -> S == HMAC(k, slot or slot-1 | A | C)? create the client : drop

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
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
