package data

import (
	"bytes"
	"errors"
	"testing"
)

// framedPair is pair() with both channels using framing f.
func framedPair(t testing.TB, c Cipher, f Framing, peerID uint32) (cli, srv *Channel) {
	a, b := pair(t, c, 0, peerID)
	cli, srv = NewFramedChannel(peerID, f), NewFramedChannel(peerID, f)
	cli.Install(a.Primary())
	srv.Install(b.Primary())
	return cli, srv
}

// plaintextOf opens pkt with the reference AEAD and returns what was
// encrypted (the framed payload), as OpenVPN would see it before it
// unframes.
func plaintextOf(t *testing.T, c Cipher, pkt []byte, v1 bool) []byte {
	t.Helper()
	hdr := 4
	if v1 {
		hdr = 1
	}
	nonce := append(append([]byte{}, pkt[hdr:hdr+4]...), 1, 2, 3, 4, 5, 6, 7, 8)
	ct := append(append([]byte{}, pkt[hdr+4+16:]...), pkt[hdr+4:hdr+4+16]...)
	ad := pkt[:hdr+4]
	if v1 {
		ad = pkt[1:5]
	}
	pt, err := refAEAD(c, keyBytes(c, 0xa)).Open(nil, nonce, ct, ad)
	if err != nil {
		t.Fatalf("reference open: %v", err)
	}
	return pt
}

// What each framing puts on the wire, checked by decrypting with the
// reference AEAD, for DATA_V2 and DATA_V1, and the round trip back.
func TestFramingOnTheWire(t *testing.T) {
	ip := []byte{0x45, 1, 2, 3, 4, 5}
	odd := []byte{0x50, 9, 8} // starts with the v2 indicator (IP version 5)
	cases := []struct {
		f       Framing
		payload []byte
		wire    []byte
	}{
		{FramingNone, ip, ip},
		{FramingLZO, ip, append([]byte{0xFA}, ip...)},
		{FramingSwap, ip, []byte{0xFB, 1, 2, 3, 4, 5, 0x45}},
		{FramingSwap, []byte{0x60}, []byte{0xFB, 0x60}},
		{FramingV2, ip, ip},
		{FramingV2, odd, []byte{0x50, 0x00, 0x50, 9, 8}},
		{FramingLZO, PingPayload, append([]byte{0xFA}, PingPayload...)},
	}
	for _, peerID := range []uint32{7, 0xFFFFFF} {
		for _, tc := range cases {
			cli, srv := framedPair(t, AES256GCM, tc.f, peerID)
			pkt := seal(t, cli, tc.payload)
			if got := plaintextOf(t, AES256GCM, pkt, peerID == 0xFFFFFF); !bytes.Equal(got, tc.wire) {
				t.Errorf("%v peer-id %x: on the wire % x, want % x", tc.f, peerID, got, tc.wire)
			}
			out, kind, err := srv.Decrypt(pkt)
			if err != nil || !bytes.Equal(out, tc.payload) {
				t.Errorf("%v peer-id %x: round trip %x %v, want %x", tc.f, peerID, out, err, tc.payload)
			}
			if bytes.Equal(tc.payload, PingPayload) && kind != KindPing {
				t.Errorf("%v: a framed ping is kind %v", tc.f, kind)
			}
		}
	}
}

// Payloads as a peer that compresses sends them are refused with
// ErrCompressed, unknown headers with ErrFraming; both after
// authentication, and nothing is delivered.
func TestFramingRefusesCompressedPayloads(t *testing.T) {
	cases := []struct {
		f    Framing
		wire []byte // the plaintext the peer encrypted
		want error
	}{
		{FramingLZO, []byte{0x66, 1, 2, 3}, ErrCompressed},
		{FramingLZO, []byte{0x45, 1, 2}, ErrFraming},
		{FramingSwap, []byte{0x69, 1, 2, 3}, ErrCompressed},
		{FramingSwap, []byte{0xFA, 1, 2}, ErrFraming},
		{FramingV2, []byte{0x50, 0x01, 1, 2}, ErrCompressed},
		{FramingV2, []byte{0x50, 0x02, 1, 2}, ErrCompressed},
		{FramingV2, []byte{0x50, 0x04, 1, 2}, ErrCompressed},
		{FramingV2, []byte{0x50, 0x07, 1, 2}, ErrFraming},
		{FramingV2, []byte{0x50}, ErrFraming},
	}
	for _, tc := range cases {
		raw, _ := pair(t, AES128GCM, 0, 3) // the peer encrypts the framed bytes as they are
		_, srv := framedPair(t, AES128GCM, tc.f, 3)
		_, _, err := srv.Decrypt(seal(t, raw, tc.wire))
		if !errors.Is(err, tc.want) {
			t.Errorf("%v % x: %v, want %v", tc.f, tc.wire, err, tc.want)
		}
	}
}

// A framed send fits the documented buffer geometry and does not
// allocate.
func TestFramingNoAllocation(t *testing.T) {
	for _, f := range []Framing{FramingLZO, FramingSwap, FramingV2} {
		cli, srv := framedPair(t, AES256GCM, f, 1)
		p := bytes.Repeat([]byte{0x50}, 1400)
		buf := make([]byte, Headroom+len(p)+Tailroom)
		rx := make([]byte, 0, len(buf)+Tailroom)
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf[Headroom:], p)
			pkt, err := cli.Encrypt(buf, len(p))
			if err != nil {
				t.Fatal(err)
			}
			rx = append(rx[:0], pkt...)
			if _, _, err := srv.Decrypt(rx); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations", f, allocs)
		}
	}
}

// FuzzUnframe: no framing panics on any decrypted payload, and an
// accepted payload is never longer than what arrived.
func FuzzUnframe(f *testing.F) {
	for _, s := range [][]byte{{}, {0xFA}, {0xFB}, {0x50}, {0x50, 0}, {0x50, 1, 2}, {0x66, 1}, {0x69}, {0x45, 0, 0}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range []Framing{FramingNone, FramingLZO, FramingSwap, FramingV2} {
			in := append([]byte(nil), b...)
			out, _, err := fr.unframe(in)
			if err == nil && len(out) > len(b) {
				t.Fatalf("%v: %d bytes out of %d", fr, len(out), len(b))
			}
		}
	})
}
