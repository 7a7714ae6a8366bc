package wire

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestControlRoundTrip(t *testing.T) {
	cases := []ControlPacket{
		{Op: HardResetClientV2, KeyID: 0, Session: SessionID{1, 2, 3, 4, 5, 6, 7, 8}},
		{Op: ControlV1, KeyID: 3, Session: SessionID{9}, NumAcks: 2, Acks: [MaxAcks]uint32{0, 7}, Remote: SessionID{0xaa}, ID: 5, Payload: []byte("hello")},
		{Op: AckV1, KeyID: 7, Session: SessionID{1}, NumAcks: 8, Acks: [MaxAcks]uint32{1, 2, 3, 4, 5, 6, 7, 8}, Remote: SessionID{2}},
	}
	for _, c := range cases {
		b, err := AppendControl(nil, &c)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != c.EncodedLen() {
			t.Fatalf("%v: encoded %d bytes, EncodedLen says %d", c.Op, len(b), c.EncodedLen())
		}
		var d ControlPacket
		if err := DecodeControl(b, &d); err != nil {
			t.Fatalf("%v: %v", c.Op, err)
		}
		if d.Op != c.Op || d.KeyID != c.KeyID || d.Session != c.Session || d.NumAcks != c.NumAcks ||
			d.Acks != c.Acks || d.ID != c.ID || !bytes.Equal(d.Payload, c.Payload) || (c.NumAcks > 0 && d.Remote != c.Remote) {
			t.Fatalf("round trip mismatch:\n got %+v\nwant %+v", d, c)
		}
	}
}

// The client's first packet as OpenVPN 2.6 sends it (no wrapping): opcode 7
// key 0, session id, no acks, message id 0.
func TestHardResetBytes(t *testing.T) {
	p := ControlPacket{Op: HardResetClientV2, Session: SessionID{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}}
	b, _ := AppendControl(nil, &p)
	want := "38" + "1122334455667788" + "00" + "00000000"
	if hex.EncodeToString(b) != want {
		t.Fatalf("got %x want %s", b, want)
	}
}

func TestDecodeControlErrors(t *testing.T) {
	var p ControlPacket
	for name, in := range map[string]string{
		"short":          "2011",
		"data opcode":    "48" + "0000000000000000" + "00",
		"too many acks":  "20" + "0000000000000000" + "09",
		"truncated acks": "20" + "0000000000000000" + "02" + "00000001",
		"no remote sid":  "20" + "0000000000000000" + "01" + "00000001" + "0000",
		"no message id":  "20" + "0000000000000000" + "00" + "0000",
		"ack trailing":   "28" + "0000000000000000" + "00" + "00",
	} {
		b, _ := hex.DecodeString(in)
		if err := DecodeControl(b, &p); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestDataHeader(t *testing.T) {
	var b [4]byte
	PutDataV2Header(b[:], 2, 0x123456)
	if hex.EncodeToString(b[:]) != "4a123456" {
		t.Fatalf("header %x", b)
	}
	op, kid, pid, n, err := DecodeDataHeader(b[:])
	if err != nil || op != DataV2 || kid != 2 || pid != 0x123456 || n != 4 {
		t.Fatalf("decode: %v %v %v %v %v", op, kid, pid, n, err)
	}
	op, kid, pid, n, err = DecodeDataHeader([]byte{0x31})
	if err != nil || op != DataV1 || kid != 1 || pid != UndefinedPeerID || n != 1 {
		t.Fatalf("decode v1: %v %v %v %v %v", op, kid, pid, n, err)
	}
	if _, _, _, _, err := DecodeDataHeader([]byte{0x20}); err == nil {
		t.Fatal("control opcode accepted as data")
	}
}

func FuzzDecodeControl(f *testing.F) {
	f.Add([]byte{0x38, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0})
	f.Add([]byte{0x28, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0x20, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 9, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p ControlPacket
		if DecodeControl(b, &p) != nil {
			return
		}
		out, err := AppendControl(nil, &p)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encode differs:\n in %x\nout %x", b, out)
		}
	})
}
