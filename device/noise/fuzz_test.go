package noise

import (
	"bytes"
	"crypto/ecdh"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Fuzz targets: every parser and every consumer of peer-supplied bytes must
// reject garbage with an error, never panic, and accept only genuine
// messages. Run one with e.g.
//
//	go test -run '^$' -fuzz FuzzConsumeInitiation -fuzztime 30s ./device/noise

func fixedKey(seed byte) PrivateKey {
	var k PrivateKey
	for i := range k {
		k[i] = seed + byte(i)
	}
	k.Clamp()
	return k
}

func fixedLocal(seed byte) *Local { return NewLocal(fixedKey(seed)) }

// fixedEphemeral is a reproducible ephemeral key, so fuzz workers (separate
// processes) build identical seed messages.
func fixedEphemeral(seed byte) *ecdh.PrivateKey {
	k := fixedKey(seed)
	return newECDHKey(&k)
}

func FuzzUnmarshalInitiation(f *testing.F) {
	m := sampleInitiation()
	f.Add(m.MarshalTo(nil))
	f.Add([]byte{1, 0, 0, 0})
	f.Add(make([]byte, MessageInitiationSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m MessageInitiation
		if err := m.Unmarshal(b); err != nil {
			return
		}
		if out := m.MarshalTo(nil); !bytes.Equal(out, b) {
			t.Fatalf("re-marshal differs:\n%x\n%x", out, b)
		}
	})
}

func FuzzUnmarshalResponse(f *testing.F) {
	m := sampleResponse()
	f.Add(m.MarshalTo(nil))
	f.Add(make([]byte, MessageResponseSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m MessageResponse
		if err := m.Unmarshal(b); err != nil {
			return
		}
		if out := m.MarshalTo(nil); !bytes.Equal(out, b) {
			t.Fatalf("re-marshal differs")
		}
	})
}

func FuzzUnmarshalCookieReply(f *testing.F) {
	m := sampleCookieReply()
	f.Add(m.MarshalTo(nil))
	f.Add([]byte{3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m MessageCookieReply
		if err := m.Unmarshal(b); err != nil {
			return
		}
		if out := m.MarshalTo(nil); !bytes.Equal(out, b) {
			t.Fatalf("re-marshal differs")
		}
	})
}

func FuzzParseTransportHeader(f *testing.F) {
	b := make([]byte, 48)
	PutTransportHeader(b, 7, 1<<40)
	f.Add(b)
	f.Add([]byte{4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, c, ok := ParseTransportHeader(b)
		if !ok {
			return
		}
		var h [MessageTransportHeaderSize]byte
		PutTransportHeader(h[:], r, c)
		if !bytes.Equal(h[:], b[:MessageTransportHeaderSize]) {
			t.Fatal("header does not round-trip")
		}
	})
}

func FuzzConsumeInitiation(f *testing.F) {
	a, b := fixedLocal(1), fixedLocal(100)
	t0 := time.Unix(1700000000, 0)
	genuine := make(map[string]bool)
	for i := 0; i < 3; i++ {
		ini, err := NewHandshake(a, b.PublicKey(), PresharedKey{}).createInitiation(uint32(i), t0.Add(time.Duration(i)*time.Second), fixedEphemeral(byte(50+i)))
		if err != nil {
			f.Fatal(err)
		}
		w := ini.MarshalTo(nil)
		genuine[string(w[8:116])] = true
		f.Add(w)
	}
	f.Add(make([]byte, MessageInitiationSize))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m MessageInitiation
		if err := m.Unmarshal(raw); err != nil {
			return
		}
		hb := NewHandshake(b, a.PublicKey(), PresharedKey{})
		find := func(k PublicKey) *Handshake {
			if k == a.PublicKey() {
				return hb
			}
			return nil
		}
		h, err := ConsumeInitiation(b, &m, t0.Add(time.Hour), find)
		if err != nil {
			return
		}
		// The Sender index (bytes 4-8) is outside the Noise transcript (only
		// mac1 covers it), so a genuine message with another Sender passes.
		if !genuine[string(raw[8:116])] {
			t.Fatalf("forged initiation accepted: %x", raw)
		}
		if _, err := h.CreateResponse(1); err != nil {
			t.Fatal(err)
		}
	})
}

// cloneInitiator copies a handshake waiting for a response, so each fuzz
// iteration starts from the same state.
func cloneInitiator(src *Handshake) *Handshake {
	src.mu.Lock()
	defer src.mu.Unlock()
	h := &Handshake{local: src.local, remote: src.remote, remoteHash: src.remoteHash}
	h.ss, h.ssOK, h.psk = src.ss, src.ssOK, src.psk
	h.state, h.hash, h.chainKey = src.state, src.hash, src.chainKey
	h.localEphemeral, h.localIndex = src.localEphemeral, src.localIndex
	return h
}

func FuzzConsumeResponse(f *testing.F) {
	a, b := fixedLocal(1), fixedLocal(100)
	t0 := time.Unix(1700000000, 0)
	psk := PresharedKey{1, 2, 3}
	template := NewHandshake(a, b.PublicKey(), psk)
	ini, err := template.createInitiation(77, t0, fixedEphemeral(7))
	if err != nil {
		f.Fatal(err)
	}
	hb := NewHandshake(b, a.PublicKey(), psk)
	hr, err := ConsumeInitiation(b, &ini, t0, func(PublicKey) *Handshake { return hb })
	if err != nil {
		f.Fatal(err)
	}
	res, err := hr.createResponse(88, fixedEphemeral(8))
	if err != nil {
		f.Fatal(err)
	}
	good := res.MarshalTo(nil)
	f.Add(good)
	f.Add(make([]byte, MessageResponseSize))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m MessageResponse
		if err := m.Unmarshal(raw); err != nil {
			return
		}
		ha := cloneInitiator(template)
		h, err := ConsumeResponse(a, &m, func(i uint32) *Handshake {
			if i == 77 {
				return ha
			}
			return nil
		})
		if err != nil {
			return
		}
		if !bytes.Equal(raw[8:60], good[8:60]) {
			t.Fatalf("forged response accepted: %x", raw)
		}
		if _, err := h.DeriveSession(t0); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzCookieMessages(f *testing.F) {
	a, b := fixedLocal(1), fixedLocal(100)
	t0 := time.Unix(1700000000, 0)
	src := netip.MustParseAddrPort("198.51.100.7:4000")
	gen := NewCookieGenerator(b.PublicKey())
	chk := NewCookieChecker(b)
	ini, _ := NewHandshake(a, b.PublicKey(), PresharedKey{}).createInitiation(5, t0, fixedEphemeral(9))
	msg := ini.MarshalTo(nil)
	gen.AddMACs(msg, t0)
	// A reply built independently of CreateReply, with a fixed nonce and
	// cookie so every fuzz worker process has the same one.
	var reply MessageCookieReply
	reply.Receiver = 5
	reply.Nonce = [CookieNonceSize]byte{1, 2, 3}
	xaead, _ := chacha20poly1305.NewX(b.cookieKey[:])
	xaead.Seal(reply.Cookie[:0], reply.Nonce[:], bytes.Repeat([]byte{0xcc}, MACSize), msg[116:132])
	if !gen.ConsumeReply(&reply, t0) {
		f.Fatal("hand-built cookie reply refused")
	}
	f.Add(msg)
	f.Add(reply.MarshalTo(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		// Arbitrary bytes as a handshake message to the checker...
		mac1 := chk.CheckMAC1(raw)
		chk.CheckMAC2(raw, src, t0)
		if mac1 && !bytes.Equal(raw[:132], msg[:132]) {
			t.Fatalf("forged mac1 accepted: %x", raw)
		}
		// ...and as a cookie reply to the generator.
		var r MessageCookieReply
		if r.Unmarshal(raw) == nil && gen.ConsumeReply(&r, t0) && !bytes.Equal(raw[8:], reply.MarshalTo(nil)[8:]) {
			t.Fatalf("forged cookie reply accepted: %x", raw)
		}
	})
}
