package tun

// Room for the TUN device's receive coalescing (GRO on write): the one
// head-room logic, used by the WireGuard device (HeadRoom.Prepare on its
// own buffers) and by BatchWriter (both OpenVPN sides).
//
// A Linux TUN device with offloads merges the TCP segments (and UDP
// datagrams) of one flow in a written batch into a single large packet,
// which the kernel then handles once instead of once per segment. It
// merges into the first packet of each run, appending the others'
// payloads, and only when that packet's buffer has the capacity: it never
// allocates. Packet buffers here are MTU-sized, so without help nothing
// would ever merge.
//
// HeadRoom predicts, per batch, which packets will be the first of a run
// and copies those few into the receiver's own 64 KiB buffers. A run of
// one flow ends when the merged packet would pass 64 KiB, after a TCP
// segment with PSH (the sender's TSO train ended there) and after a
// shorter segment; the packet after that starts the next run. A TCP stream
// of 1420-byte packets copies about one packet per TSO train. A wrong
// guess costs only a missed merge or a needless copy, never a wrong
// packet: the TUN device checks every merge itself.

import "encoding/binary"

const (
	// maxHeads bounds the runs one batch prepares; later runs are written
	// unmerged.
	maxHeads = 16
	// maxMerged is the largest merged IP packet.
	maxMerged = 1<<16 - 1
)

// flowKey identifies a transport flow for merging purposes.
type flowKey struct {
	src, dst [16]byte
	ports    uint32
	proto    uint8
}

// run is one predicted merge: its flow, its segment size, the bytes still
// free in its first packet, and whether it can take no more.
type run struct {
	key    flowKey
	gso    int
	room   int
	closed bool
}

// HeadRoom is one receiver goroutine's set of 64 KiB first-packet
// buffers. It is used by that goroutine alone; the zero value is ready.
type HeadRoom struct {
	bufs   [][]byte // buffers of headBufferSize(offset): maxHeads, or MaxAddedHeads for Add
	offset int      // the offset bufs were sized for
	runs   []run
	used   int // heads handed out by Add since the last Reset
}

// MaxAddedHeads bounds the heads handed out by Add between two Resets:
// one write gathered from many small batches (a gateway's read of short
// runs from many peers) merges at most this many runs.
const MaxAddedHeads = 64

// headBufferSize is the capacity of a run's first packet: the TUN device's
// capacity check counts the offset twice, so this lets a run grow to
// exactly the largest IP packet.
func headBufferSize(offset int) int { return 2*offset + maxMerged }

// flowOf parses pkt's flow, the length of its IP and transport headers,
// and whether it ends a run (TCP PSH); ok is false for what the TUN device
// does not merge.
func flowOf(pkt []byte) (k flowKey, hdrLen int, last, ok bool) {
	var l4 []byte
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		ihl := int(pkt[0]&0xf) * 4
		if ihl != 20 || binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return k, 0, false, false // options or fragments: never merged
		}
		copy(k.src[:], pkt[12:16])
		copy(k.dst[:], pkt[16:20])
		k.proto = pkt[9]
		l4 = pkt[20:]
		hdrLen = 20
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		copy(k.src[:], pkt[8:24])
		copy(k.dst[:], pkt[24:40])
		k.proto = pkt[6]
		l4 = pkt[40:]
		hdrLen = 40
	default:
		return k, 0, false, false
	}
	switch k.proto {
	case 6: // TCP
		if len(l4) < 20 {
			return k, 0, false, false
		}
		th := int(l4[12]>>4) * 4
		if th < 20 {
			return k, 0, false, false
		}
		switch l4[13] {
		case tcpFlagACK:
		case tcpFlagACK | tcpFlagPSH:
			last = true
		default:
			return k, 0, false, false
		}
		hdrLen += th
	case 17: // UDP
		if len(l4) < 8 {
			return k, 0, false, false
		}
		hdrLen += 8
	default:
		return k, 0, false, false
	}
	if hdrLen >= len(pkt) || len(pkt) > maxMerged {
		return k, 0, false, false // no payload: never merged
	}
	k.ports = binary.BigEndian.Uint32(l4[0:4])
	return k, hdrLen, last, true
}

// Prepare rewrites bufs (packets at bufs[i][offset:]) so that every
// predicted first packet of a run sits in a buffer with room to merge
// into. It replaces only elements of bufs, never the bytes of the
// caller's buffers, and allocates only when it needs more head buffers
// than any batch before. Each call starts over: the heads of the call
// before may be reused.
func (h *HeadRoom) Prepare(bufs [][]byte, offset int) {
	h.used = 0
	h.prepare(bufs, offset, maxHeads)
	h.used = 0
}

// Add is Prepare for one of several batches written together later: it
// hands out only heads not handed out since the last Reset (at most
// MaxAddedHeads in all), so the batches added before keep theirs. Call
// Reset once their write is done.
func (h *HeadRoom) Add(bufs [][]byte, offset int) {
	if offset != h.offset && h.used > 0 {
		return // heads of another offset still in use: no merging here
	}
	h.prepare(bufs, offset, MaxAddedHeads)
}

// Reset makes every head available again; the packets Add placed in them
// must have been written.
func (h *HeadRoom) Reset() { h.used = 0 }

// prepare places bufs' predicted first packets in heads h.used onwards,
// up to limit heads in all.
func (h *HeadRoom) prepare(bufs [][]byte, offset, limit int) {
	if len(bufs) < 2 {
		return
	}
	if offset != h.offset {
		h.bufs, h.offset = nil, offset // sized for another offset
	}
	h.runs = h.runs[:0]
	for i, b := range bufs {
		pkt := b[offset:]
		k, hdrLen, last, ok := flowOf(pkt)
		if !ok {
			continue
		}
		payload := len(pkt) - hdrLen
		j := 0
		for j < len(h.runs) && h.runs[j].key != k {
			j++
		}
		if j < len(h.runs) {
			r := &h.runs[j]
			if !r.closed && payload <= r.gso && payload <= r.room {
				r.room -= payload
				r.closed = last || payload < r.gso
				continue
			}
		}
		// pkt starts a run.
		r := run{key: k, gso: payload, room: maxMerged - len(pkt), closed: last}
		if j < len(h.runs) {
			h.runs[j] = r
		} else {
			h.runs = append(h.runs, r)
		}
		// Nothing merges into the last packet of a batch, nor into a run
		// already closed.
		if i == len(bufs)-1 || r.closed || h.used == limit {
			continue
		}
		if h.used == len(h.bufs) {
			h.bufs = append(h.bufs, make([]byte, headBufferSize(offset)))
		}
		hb := h.bufs[h.used]
		h.used++
		n := copy(hb[offset:], pkt)
		bufs[i] = hb[:offset+n]
	}
}
