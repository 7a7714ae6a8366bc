package data

// MinSendBuffer is the smallest buffer EncryptInto grows a send buffer to:
// an MTU-size packet of the usual tunnels, with any transport head room,
// fits, so a warm buffer never grows again for such packets.
const MinSendBuffer = 2048

// EncryptInto copies the IP packet (or ping, OCC payload) p into the send
// buffer *buf and seals it there, as Encrypt does, leaving head bytes free
// before the packet for the transport's framing (2 for a TCP length
// prefix, 0 for UDP). *buf is a buffer the caller reuses across packets:
// when it is smaller than head+Headroom+len(p)+Tailroom it is replaced by
// a larger one (at least MinSendBuffer bytes), so a warm buffer costs no
// allocation. It returns the frame, a sub-slice of *buf: head free bytes
// followed by the sealed packet (frame[head:]). The frame is valid until
// the next use of *buf.
func (c *Channel) EncryptInto(buf *[]byte, head int, p []byte) ([]byte, error) {
	if head < 0 {
		return nil, ErrRoom
	}
	need := head + Headroom + len(p) + Tailroom
	if cap(*buf) < need {
		*buf = make([]byte, max(need, MinSendBuffer))
	}
	b := (*buf)[:cap(*buf)]
	copy(b[head+Headroom:], p)
	pkt, err := c.Encrypt(b[head:], len(p))
	if err != nil {
		return nil, err
	}
	off := cap(b) - cap(pkt) // where pkt starts in b: at least head
	return b[off-head : off+len(pkt)], nil
}
