package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxTCPPacket is the largest packet the 16-bit TCP framing can carry.
const MaxTCPPacket = 0xFFFF

// AppendTCPFrame appends the 2-byte big-endian length and the packet.
func AppendTCPFrame(b, pkt []byte) ([]byte, error) {
	if len(pkt) > MaxTCPPacket {
		return b, fmt.Errorf("%w: %d", ErrBadLength, len(pkt))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(pkt)))
	return append(b, pkt...), nil
}

// ReadTCPFrame reads one framed packet from r into buf and returns it. A
// zero-length frame is an error (OpenVPN never sends one). buf must hold
// MaxTCPPacket bytes or the frame must fit in it.
func ReadTCPFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n == 0 {
		return nil, fmt.Errorf("%w: zero-length frame", ErrBadLength)
	}
	if n > len(buf) {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds buffer of %d", ErrBadLength, n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf[:n], nil
}

// SplitTCPFrames splits a byte stream held in b into whole frames, calling
// fn for each, and returns the number of bytes consumed. A partial frame at
// the end is left unconsumed.
func SplitTCPFrames(b []byte, fn func(pkt []byte) error) (int, error) {
	used := 0
	for len(b)-used >= 2 {
		n := int(binary.BigEndian.Uint16(b[used:]))
		if n == 0 {
			return used, fmt.Errorf("%w: zero-length frame at offset %d", ErrBadLength, used)
		}
		if len(b)-used-2 < n {
			break
		}
		if err := fn(b[used+2 : used+2+n]); err != nil {
			return used, err
		}
		used += 2 + n
	}
	return used, nil
}
