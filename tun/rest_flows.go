package tun

// Whether the packets trustedGRO leaves to the fallback writer could be
// merged by it at all.
//
// The fallback (golang.zx2c4.com/wireguard/tun's Write) merges UDP whose
// checksum verifies, and TCP that classify refused, per flow, and writes
// every packet with the runtime's system call bookkeeping
// (os.File.Write), which wakes sysmon and hands the P to another thread
// for a write that runs the receiving stack for long. When it can merge
// nothing (no two packets of the rest share a flow, as from a peer that
// routes a network, or the packets are IPv4 UDP without a checksum, which
// it never merges) that bookkeeping is all it adds, and groWriter writes
// the packets raw itself. In the netpeers profile of 2026-12-02 14:38
// (docs/benchmarks-history.md) every packet the gateway wrote was of the
// second kind, and sysmon took 13% of the gateway's CPU.

import "encoding/binary"

// restSlots is the size of restFlowsDistinct's table: twice the largest
// batch a device hands a TUN (128), so probes stay short.
const restSlots = 256

// flowTable is a set of flow hashes, cleared after each use.
type flowTable struct {
	slot [restSlots]uint64 // 0 is empty; a hash is stored with its low bit set
	used []int             // indexes of the filled slots
}

// restFlowsDistinct reports whether no two packets (at offset) of bufs
// belong to one UDP or TCP flow, so that no merging writer could join
// any of them. Packets no writer merges (not IP, not UDP or TCP, IPv4
// fragments, IPv6 with an extension header, IPv4 UDP without a checksum)
// count as distinct. A hash
// collision answers false, which only sends the batch to the fallback.
// Batches larger than restSlots/2 answer false. It allocates nothing.
func (t *flowTable) restFlowsDistinct(bufs [][]byte, offset int) bool {
	if len(bufs) > restSlots/2 {
		return false
	}
	distinct := true
	for _, b := range bufs {
		h, ok := flowHash(b[offset:])
		if !ok {
			continue
		}
		h |= 1
		i := int(h>>1) % restSlots
		for t.slot[i] != 0 && t.slot[i] != h {
			i = (i + 1) % restSlots
		}
		if t.slot[i] == h {
			distinct = false
			break
		}
		t.slot[i] = h
		t.used = append(t.used, i)
	}
	for _, i := range t.used {
		t.slot[i] = 0
	}
	t.used = t.used[:0]
	return distinct
}

// flowHash returns a hash of pkt's flow (IP version, protocol, addresses
// and ports) when pkt is UDP or TCP that a GRO writer could merge with
// another packet of its flow; false for anything no writer merges.
func flowHash(pkt []byte) (uint64, bool) {
	if len(pkt) < 20 {
		return 0, false
	}
	var addrs []byte
	var proto byte
	var l4 int
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0xf) * 4
		if ihl < 20 || len(pkt) < ihl+4 {
			return 0, false
		}
		if binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return 0, false // MF or a fragment offset: never merged
		}
		proto, addrs, l4 = pkt[9], pkt[12:20], ihl
	case 6:
		if len(pkt) < 44 {
			return 0, false
		}
		proto, addrs, l4 = pkt[6], pkt[8:40], 40
	default:
		return 0, false
	}
	if proto != 6 && proto != 17 {
		return 0, false
	}
	if proto == 17 && l4 == 20 && pkt[0]>>4 == 4 && len(pkt) >= l4+8 && pkt[l4+6] == 0 && pkt[l4+7] == 0 {
		// IPv4 UDP without a checksum (VXLAN and Geneve send these): the
		// fallback merges only UDP whose checksum it verified, and a
		// zero field never verifies.
		return 0, false
	}
	// FNV-1a over version, protocol, addresses and ports.
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	h = (h ^ uint64(pkt[0]>>4)) * prime
	h = (h ^ uint64(proto)) * prime
	for _, c := range addrs {
		h = (h ^ uint64(c)) * prime
	}
	for _, c := range pkt[l4 : l4+4] {
		h = (h ^ uint64(c)) * prime
	}
	return h, true
}
