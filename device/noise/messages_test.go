package noise

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}

func sampleInitiation() MessageInitiation {
	var m MessageInitiation
	m.Sender = 0x01020304
	fill(m.Ephemeral[:], 10)
	fill(m.Static[:], 50)
	fill(m.Timestamp[:], 100)
	fill(m.MAC1[:], 150)
	fill(m.MAC2[:], 200)
	return m
}

func sampleResponse() MessageResponse {
	var m MessageResponse
	m.Sender, m.Receiver = 0xa1a2a3a4, 0xb1b2b3b4
	fill(m.Ephemeral[:], 1)
	fill(m.Empty[:], 40)
	fill(m.MAC1[:], 80)
	fill(m.MAC2[:], 120)
	return m
}

func sampleCookieReply() MessageCookieReply {
	var m MessageCookieReply
	m.Receiver = 0xdeadbeef
	fill(m.Nonce[:], 3)
	fill(m.Cookie[:], 70)
	return m
}

func TestInitiationWireLayout(t *testing.T) {
	m := sampleInitiation()
	b := m.MarshalTo(nil)
	if len(b) != MessageInitiationSize {
		t.Fatalf("size %d", len(b))
	}
	if !bytes.Equal(b[:8], []byte{1, 0, 0, 0, 4, 3, 2, 1}) {
		t.Errorf("header % x", b[:8])
	}
	for _, f := range []struct {
		off  int
		want []byte
	}{{8, m.Ephemeral[:]}, {40, m.Static[:]}, {88, m.Timestamp[:]}, {116, m.MAC1[:]}, {132, m.MAC2[:]}} {
		if !bytes.Equal(b[f.off:f.off+len(f.want)], f.want) {
			t.Errorf("field at %d", f.off)
		}
	}
	var got MessageInitiation
	if err := got.Unmarshal(b); err != nil || got != m {
		t.Fatalf("round trip: %v", err)
	}
}

func TestResponseWireLayout(t *testing.T) {
	m := sampleResponse()
	b := m.MarshalTo(nil)
	if len(b) != MessageResponseSize {
		t.Fatalf("size %d", len(b))
	}
	if !bytes.Equal(b[:12], []byte{2, 0, 0, 0, 0xa4, 0xa3, 0xa2, 0xa1, 0xb4, 0xb3, 0xb2, 0xb1}) {
		t.Errorf("header % x", b[:12])
	}
	for _, f := range []struct {
		off  int
		want []byte
	}{{12, m.Ephemeral[:]}, {44, m.Empty[:]}, {60, m.MAC1[:]}, {76, m.MAC2[:]}} {
		if !bytes.Equal(b[f.off:f.off+len(f.want)], f.want) {
			t.Errorf("field at %d", f.off)
		}
	}
	var got MessageResponse
	if err := got.Unmarshal(b); err != nil || got != m {
		t.Fatalf("round trip: %v", err)
	}
}

func TestCookieReplyWireLayout(t *testing.T) {
	m := sampleCookieReply()
	b := m.MarshalTo(nil)
	if len(b) != MessageCookieReplySize {
		t.Fatalf("size %d", len(b))
	}
	if !bytes.Equal(b[:8], []byte{3, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde}) {
		t.Errorf("header % x", b[:8])
	}
	if !bytes.Equal(b[8:32], m.Nonce[:]) || !bytes.Equal(b[32:], m.Cookie[:]) {
		t.Error("body")
	}
	var got MessageCookieReply
	if err := got.Unmarshal(b); err != nil || got != m {
		t.Fatalf("round trip: %v", err)
	}
}

func TestMarshalAppends(t *testing.T) {
	m := sampleInitiation()
	prefix := []byte("xyz")
	b := m.MarshalTo(prefix)
	if string(b[:3]) != "xyz" || len(b) != 3+MessageInitiationSize {
		t.Fatalf("MarshalTo did not append: len %d", len(b))
	}
	var got MessageInitiation
	if err := got.Unmarshal(b[3:]); err != nil || got != m {
		t.Fatal("appended message does not round-trip")
	}
	buf := make([]byte, 0, 256)
	out := m.MarshalTo(buf)
	if &out[0] != &buf[:1][0] {
		t.Error("MarshalTo reallocated although capacity sufficed")
	}
}

func TestUnmarshalRejects(t *testing.T) {
	ini := sampleInitiation()
	res := sampleResponse()
	ck := sampleCookieReply()
	iniB, resB, ckB := ini.MarshalTo(nil), res.MarshalTo(nil), ck.MarshalTo(nil)
	withType := func(b []byte, typ uint32) []byte {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(c, typ)
		return c
	}
	var mi MessageInitiation
	var mr MessageResponse
	var mc MessageCookieReply
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"initiation one byte short", mi.Unmarshal(iniB[:147]), ErrMessageSize},
		{"initiation one byte long", mi.Unmarshal(append(iniB, 0)), ErrMessageSize},
		{"initiation empty", mi.Unmarshal(nil), ErrMessageSize},
		{"initiation with response type", mi.Unmarshal(withType(iniB, 2)), ErrMessageType},
		{"initiation with reserved bytes set", mi.Unmarshal(withType(iniB, 0x0100_0001)), ErrMessageType},
		{"response with initiation bytes", mr.Unmarshal(iniB), ErrMessageSize},
		{"response with cookie type", mr.Unmarshal(withType(resB, 3)), ErrMessageType},
		{"cookie reply short", mc.Unmarshal(ckB[:63]), ErrMessageSize},
		{"cookie reply with transport type", mc.Unmarshal(withType(ckB, 4)), ErrMessageType},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if mi != (MessageInitiation{}) || mr != (MessageResponse{}) || mc != (MessageCookieReply{}) {
		t.Error("rejected Unmarshal modified the message")
	}
}

func TestTransportHeader(t *testing.T) {
	b := make([]byte, MessageTransportOverhead)
	PutTransportHeader(b, 0x11223344, 0x0102030405060708)
	if !bytes.Equal(b[:16], []byte{4, 0, 0, 0, 0x44, 0x33, 0x22, 0x11, 8, 7, 6, 5, 4, 3, 2, 1}) {
		t.Errorf("header % x", b[:16])
	}
	r, c, ok := ParseTransportHeader(b)
	if !ok || r != 0x11223344 || c != 0x0102030405060708 {
		t.Errorf("parse = %x %x %v", r, c, ok)
	}
	if _, _, ok := ParseTransportHeader(b[:MessageTransportOverhead-1]); ok {
		t.Error("accepted a message shorter than header+tag")
	}
	b[1] = 1
	if _, _, ok := ParseTransportHeader(b); ok {
		t.Error("accepted reserved bytes")
	}
	if MessageType(b) != 0 || MessageType([]byte{4, 0, 0}) != 0 || MessageType([]byte{2, 0, 0, 0, 9}) != 2 {
		t.Error("MessageType")
	}
}

func TestMessagesDoNotAllocate(t *testing.T) {
	ini, res, ck := sampleInitiation(), sampleResponse(), sampleCookieReply()
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		b := ini.MarshalTo(buf[:0])
		var m MessageInitiation
		_ = m.Unmarshal(b)
		b = res.MarshalTo(buf[:0])
		var r MessageResponse
		_ = r.Unmarshal(b)
		b = ck.MarshalTo(buf[:0])
		var c MessageCookieReply
		_ = c.Unmarshal(b)
		PutTransportHeader(buf[:32], 1, 2)
		ParseTransportHeader(buf[:32])
	})
	if allocs != 0 {
		t.Errorf("%v allocations per marshal/unmarshal round", allocs)
	}
}
