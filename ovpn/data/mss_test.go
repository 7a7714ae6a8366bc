package data

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"testing"
)

// checksum is the Internet checksum of b folded onto sum.
func checksum(sum uint32, b []byte) uint16 {
	for ; len(b) > 1; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// tcpSum is the TCP checksum of pkt's segment over its pseudo-header (0
// when the stored checksum is right).
func tcpSum(pkt []byte) uint16 {
	var sum uint32
	var seg []byte
	if pkt[0]>>4 == 4 {
		hl := int(pkt[0]&0xf) * 4
		seg = pkt[hl:]
		for i := 12; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(pkt[i:]))
		}
	} else {
		seg = pkt[40:]
		for i := 8; i < 40; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(pkt[i:]))
		}
	}
	sum += 6 + uint32(len(seg))
	return checksum(sum, seg)
}

// syn builds an IPv4 (v6: IPv6) TCP packet with flags and the options
// Linux puts in a SYN (MSS mss, SACK permitted, timestamps, NOP, window
// scale), with a right checksum.
func syn(v6 bool, flags byte, mss uint16) []byte {
	opts := []byte{2, 4, byte(mss >> 8), byte(mss), 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7}
	tcp := make([]byte, 20+len(opts))
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5300)
	binary.BigEndian.PutUint32(tcp[4:], 0x01020304)
	tcp[12] = byte(len(tcp)/4) << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	copy(tcp[20:], opts)
	var pkt []byte
	if v6 {
		pkt = make([]byte, 40, 40+len(tcp))
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(tcp)))
		pkt[6], pkt[7] = 6, 64
		pkt[8], pkt[23] = 0xfd, 1
		pkt[24], pkt[39] = 0xfd, 2
	} else {
		pkt = make([]byte, 20, 20+len(tcp))
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(20+len(tcp)))
		pkt[6] = 0x40 // DF
		pkt[8], pkt[9] = 64, 6
		copy(pkt[12:], []byte{10, 13, 0, 2, 10, 13, 0, 1})
		binary.BigEndian.PutUint16(pkt[10:], checksum(0, pkt[:20]))
	}
	pkt = append(pkt, tcp...)
	binary.BigEndian.PutUint16(pkt[len(pkt)-len(tcp)+16:], tcpSum(pkt))
	return pkt
}

// mssOf is the MSS option of pkt, a packet syn built.
func mssOf(pkt []byte) int {
	off := 20
	if pkt[0]>>4 == 6 {
		off = 40
	}
	return int(binary.BigEndian.Uint16(pkt[off+22:]))
}

func TestClampMSS(t *testing.T) {
	const synFlag, synAck, ack = 0x02, 0x12, 0x10
	for _, tc := range []struct {
		name  string
		pkt   []byte
		clamp int
		want  int // MSS afterwards
		ok    bool
	}{
		{"v4 SYN", syn(false, synFlag, 1460), 1188, 1188, true},
		{"v4 SYN-ACK", syn(false, synAck, 1460), 1188, 1188, true},
		{"v6 SYN gets 20 less", syn(true, synFlag, 1440), 1188, 1168, true},
		{"v4 SYN already smaller", syn(false, synFlag, 1000), 1188, 1000, false},
		{"v4 SYN equal", syn(false, synFlag, 1188), 1188, 1188, false},
		{"v4 ACK untouched", syn(false, ack, 1460), 1188, 1460, false},
		{"v6 ACK untouched", syn(true, ack, 1460), 1188, 1460, false},
		{"off", syn(false, synFlag, 1460), 0, 1460, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClampMSS(tc.pkt, tc.clamp); got != tc.ok {
				t.Errorf("ClampMSS = %v, want %v", got, tc.ok)
			}
			if got := mssOf(tc.pkt); got != tc.want {
				t.Errorf("MSS %d, want %d", got, tc.want)
			}
			if s := tcpSum(tc.pkt); s != 0 {
				t.Errorf("TCP checksum wrong afterwards (residue %#x)", s)
			}
		})
	}

	// Packets that must not be touched, MSS option or not.
	frag := syn(false, synFlag, 1460)
	binary.BigEndian.PutUint16(frag[6:], 0x2000|5) // a later fragment
	short := syn(false, synFlag, 1460)
	binary.BigEndian.PutUint16(short[2:], uint16(len(short)+4)) // total length says more
	udp := syn(false, synFlag, 1460)
	udp[9] = 17
	v6ext := syn(true, synFlag, 1460)
	v6ext[6] = 0 // hop-by-hop options first
	trunc := syn(false, synFlag, 1460)
	trunc[20+12] = 0xf0 // data offset past the end
	badOpt := syn(false, synFlag, 1460)
	badOpt[20+21] = 40 // the MSS option's length runs past the options
	for name, p := range map[string][]byte{"fragment": frag, "length mismatch": short, "UDP": udp,
		"IPv6 extension header": v6ext, "data offset past the end": trunc, "bad option length": badOpt,
		"empty": nil, "short": {0x45, 0, 0}} {
		before := string(p)
		if ClampMSS(p, 1188) || string(p) != before {
			t.Errorf("%s: changed", name)
		}
	}
}

// The MSS that MSS works out makes the largest segment's datagram exactly
// as large as mssfix allows (no more, and for AEAD no less), through the
// channel's own Encrypt: the formula and the framing agree.
func TestMSSFitsEncapsulation(t *testing.T) {
	type cbcCase struct {
		c      Cipher
		digest func() hash.Hash
	}
	for _, tc := range []struct {
		name  string
		fix   MSSFix
		frame Frame
		cbc   *cbcCase
		mss   int // expected, as OpenVPN 2.6 computes it
	}{
		{"default, GCM, UDPv4", DefaultMSSFix, Frame{Cipher: AES256GCM, DataV2: true}, nil, 1400},
		{"1280 mtu, GCM, UDPv4", MSSFix{Max: 1280, Encap: true}, Frame{Cipher: AES256GCM, DataV2: true}, nil, 1188},
		{"1280 mtu, ChaCha, UDPv6", MSSFix{Max: 1280, Encap: true}, Frame{Cipher: ChaCha20Poly1305, DataV2: true, IPv6: true}, nil, 1168},
		{"1450, GCM, DATA_V1, comp-lzo", MSSFix{Max: 1450}, Frame{Cipher: AES128GCM, Framing: FramingLZO}, nil, 1450 - 21 - 1 - 40},
		{"default, GCM, TCPv4", DefaultMSSFix, Frame{Cipher: AES256GCM, DataV2: true, TCP: true}, nil, 1492 - 40 - 2 - 24 - 40},
		{"default, CBC SHA1", DefaultMSSFix, Frame{Cipher: AES256CBC, Digest: 20, DataV2: true}, &cbcCase{AES256CBC, sha1.New}, 1379},
		{"1300, CBC SHA256, DATA_V1", MSSFix{Max: 1300}, Frame{Cipher: AES128CBC, Digest: 32}, &cbcCase{AES128CBC, sha256.New}, 1203},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mss := tc.fix.MSS(tc.frame)
			if mss != tc.mss {
				t.Fatalf("MSS %d, want %d", mss, tc.mss)
			}
			peerID := uint32(7)
			if !tc.frame.DataV2 {
				peerID = 0xFFFFFF
			}
			var cli, srv *Channel
			if tc.cbc != nil {
				cli, srv = cbcPair(t, tc.cbc.c, tc.cbc.digest, peerID, tc.frame.Framing)
			} else {
				cli, srv = pair(t, tc.frame.Cipher, 1, peerID)
				if tc.frame.Framing != FramingNone {
					cli.framing, srv.framing = tc.frame.Framing, tc.frame.Framing
				}
			}
			limit := tc.fix.Max
			if tc.fix.Encap {
				limit -= 28
				if tc.frame.IPv6 {
					limit -= 20
				}
				if tc.frame.TCP {
					limit -= 12
				}
			}
			if tc.frame.TCP {
				limit -= 2
			}
			size := func(seg int) int {
				p := make([]byte, 40+seg)
				p[0] = 0x45
				return len(seal(t, cli, p))
			}
			if n := size(mss); n > limit {
				t.Errorf("a %d-byte segment makes a %d-byte packet, over %d", mss, n, limit)
			}
			if tc.cbc == nil {
				if n := size(mss + 1); n <= limit {
					t.Errorf("a %d-byte segment still fits (%d bytes): MSS %d is not the largest", mss+1, n, mss)
				}
			}
			// A SYN through the channel comes out clamped on the other side,
			// whether the sender or the receiver clamps.
			for _, dir := range []struct{ tx, rx *Channel }{{cli, srv}, {srv, cli}} {
				dir.tx.SetMSS(mss)
				pkt := seal(t, dir.tx, syn(false, 0x02, 1460))
				dir.tx.SetMSS(0)
				out, kind, err := dir.rx.Decrypt(pkt)
				if err != nil || kind != KindPacket {
					t.Fatalf("Decrypt: %v, %v", kind, err)
				}
				if mssOf(out) != mss || tcpSum(out) != 0 {
					t.Errorf("sender clamping: MSS %d (want %d), checksum residue %#x", mssOf(out), mss, tcpSum(out))
				}
				dir.rx.SetMSS(mss)
				pkt = seal(t, dir.tx, syn(false, 0x02, 1460))
				out, _, err = dir.rx.Decrypt(pkt)
				dir.rx.SetMSS(0)
				if err != nil || mssOf(out) != mss || tcpSum(out) != 0 {
					t.Errorf("receiver clamping: MSS %d (want %d), err %v", mssOf(out), mss, err)
				}
			}
		})
	}
	if got := (MSSFix{Max: 1400, Fixed: true}).MSS(Frame{Cipher: AES256GCM}); got != 1360 {
		t.Errorf("mssfix 1400 fixed: MSS %d, want 1360", got)
	}
	if got := (MSSFix{}).MSS(Frame{Cipher: AES256GCM}); got != 0 {
		t.Errorf("mssfix 0: MSS %d, want 0", got)
	}
}
