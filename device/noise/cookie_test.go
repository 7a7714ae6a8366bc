package noise

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// macPair: a sends to b. gen is a's generator for b, chk is b's checker.
type macPair struct {
	*pair
	gen *CookieGenerator
	chk *CookieChecker
}

func newMACPair(t testing.TB) *macPair {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	return &macPair{pair: p, gen: NewCookieGenerator(p.b.PublicKey()), chk: NewCookieChecker(p.b)}
}

func (p *macPair) initiation(t testing.TB, now time.Time) []byte {
	t.Helper()
	ini, err := p.ab.CreateInitiation(42, now)
	if err != nil {
		t.Fatal(err)
	}
	b := ini.MarshalTo(nil)
	p.gen.AddMACs(b, now)
	return b
}

var (
	srcA  = netip.MustParseAddrPort("192.0.2.1:51820")
	srcA2 = netip.MustParseAddrPort("192.0.2.1:51821")
	srcB  = netip.MustParseAddrPort("192.0.2.2:51820")
	src6  = netip.MustParseAddrPort("[2001:db8::1]:51820")
)

func TestMAC1(t *testing.T) {
	p := newMACPair(t)
	msg := p.initiation(t, p.t0)
	if !p.chk.CheckMAC1(msg) {
		t.Fatal("valid mac1 rejected")
	}
	// Any change before or inside mac1 breaks it; mac2 is outside its scope.
	for _, i := range []int{0, 4, 8, 100, 115, 116, 131} {
		bad := append([]byte(nil), msg...)
		bad[i] ^= 0x80
		if p.chk.CheckMAC1(bad) {
			t.Errorf("mac1 accepted with byte %d changed", i)
		}
	}
	bad := append([]byte(nil), msg...)
	bad[140] ^= 1
	if !p.chk.CheckMAC1(bad) {
		t.Error("mac1 depends on mac2")
	}
	// A checker for someone else rejects it; so do odd sizes.
	if NewCookieChecker(p.a).CheckMAC1(msg) {
		t.Error("mac1 accepted by the wrong responder")
	}
	for _, n := range []int{0, 31, 91, 147, 149} {
		if p.chk.CheckMAC1(make([]byte, n)) {
			t.Errorf("mac1 check passed a %d-byte message", n)
		}
	}
	// Responses carry mac1 too.
	h, err := ConsumeInitiation(p.b, func() *MessageInitiation { var m MessageInitiation; _ = m.Unmarshal(msg); return &m }(), p.t0, p.findAtB)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := h.CreateResponse(3)
	rb := res.MarshalTo(nil)
	NewCookieGenerator(p.a.PublicKey()).AddMACs(rb, p.t0)
	if !NewCookieChecker(p.a).CheckMAC1(rb) {
		t.Error("response mac1 rejected")
	}
}

func TestCookieRoundTrip(t *testing.T) {
	p := newMACPair(t)
	now := p.t0
	msg := p.initiation(t, now)
	// No cookie yet: mac2 is zero and invalid.
	if p.chk.CheckMAC2(msg, srcA, now) {
		t.Fatal("mac2 valid before any cookie was issued")
	}
	for _, b := range msg[132:] {
		if b != 0 {
			t.Fatal("mac2 written without a cookie")
		}
	}
	reply, err := p.chk.CreateReply(msg, 42, srcA, now)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Receiver != 42 {
		t.Errorf("reply receiver %d", reply.Receiver)
	}
	// The reply survives the wire.
	var wire MessageCookieReply
	if err := wire.Unmarshal(reply.MarshalTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !p.gen.ConsumeReply(&wire, now) {
		t.Fatal("cookie reply rejected")
	}
	now = now.Add(time.Second)
	msg = p.initiation(t, now)
	if !p.chk.CheckMAC1(msg) || !p.chk.CheckMAC2(msg, srcA, now) {
		t.Fatal("message with fresh cookie rejected")
	}
	// The cookie binds the source address (and port), not the checker's mood.
	for _, src := range []netip.AddrPort{srcB, srcA2, src6} {
		if p.chk.CheckMAC2(msg, src, now) {
			t.Errorf("mac2 accepted from %v", src)
		}
	}
	// IPv4-mapped IPv6 is the same source as plain IPv4.
	mapped := netip.AddrPortFrom(netip.AddrFrom16(srcA.Addr().As16()), srcA.Port())
	if !p.chk.CheckMAC2(msg, mapped, now) {
		t.Error("IPv4-mapped source treated as a different address")
	}
	// Tampering with the message breaks mac2.
	bad := append([]byte(nil), msg...)
	bad[140] ^= 1
	if p.chk.CheckMAC2(bad, srcA, now) {
		t.Error("mac2 accepted after tampering")
	}
}

func TestCookieReplyBindsToLastMAC1(t *testing.T) {
	p := newMACPair(t)
	first := p.initiation(t, p.t0)
	reply, _ := p.chk.CreateReply(first, 42, srcA, p.t0)
	// A newer message was sent since: the reply to the old one is refused.
	_ = p.initiation(t, p.t0.Add(time.Second))
	if p.gen.ConsumeReply(&reply, p.t0) {
		t.Error("reply accepted for a message other than the last one")
	}
	// A generator that never sent anything refuses replies.
	if NewCookieGenerator(p.b.PublicKey()).ConsumeReply(&reply, p.t0) {
		t.Error("reply accepted with no message sent")
	}
	// A reply tampered with, or from another responder's key, is refused.
	latest := p.initiation(t, p.t0.Add(2*time.Second))
	reply, _ = p.chk.CreateReply(latest, 42, srcA, p.t0)
	tampered := reply
	tampered.Cookie[3] ^= 1
	if p.gen.ConsumeReply(&tampered, p.t0) {
		t.Error("tampered reply accepted")
	}
	foreign, _ := NewCookieChecker(p.a).CreateReply(latest, 42, srcA, p.t0)
	if p.gen.ConsumeReply(&foreign, p.t0) {
		t.Error("reply encrypted for another key accepted")
	}
	if !p.gen.ConsumeReply(&reply, p.t0) {
		t.Error("genuine reply refused")
	}
	if _, err := p.chk.CreateReply(make([]byte, 10), 1, srcA, p.t0); err == nil {
		t.Error("CreateReply accepted a 10-byte message")
	}
}

func TestCookieExpiry(t *testing.T) {
	p := newMACPair(t)
	t0 := p.t0
	msg := p.initiation(t, t0)
	reply, _ := p.chk.CreateReply(msg, 42, srcA, t0)
	if !p.gen.ConsumeReply(&reply, t0) {
		t.Fatal("reply refused")
	}
	// Just inside the lifetime: both sides still use and accept it.
	at := t0.Add(CookieRefreshTime)
	msg = p.initiation(t, at)
	if !p.chk.CheckMAC2(msg, srcA, at) {
		t.Fatal("cookie refused at exactly CookieRefreshTime")
	}
	// After it the checker refuses the old secret...
	late := t0.Add(CookieRefreshTime + time.Millisecond)
	if p.chk.CheckMAC2(msg, srcA, late) {
		t.Error("mac2 accepted after the secret expired")
	}
	// ...and the generator stops sending mac2.
	msg = p.initiation(t, late)
	for _, b := range msg[132:] {
		if b != 0 {
			t.Fatal("generator still sends mac2 with an expired cookie")
		}
	}
	// A new reply rotates the secret: the fresh cookie works, the old
	// cookie does not.
	var oldCookie [MACSize]byte
	p.gen.mu.Lock()
	oldCookie = p.gen.cookie
	p.gen.mu.Unlock()
	reply, _ = p.chk.CreateReply(msg, 42, srcA, late)
	if !p.gen.ConsumeReply(&reply, late) {
		t.Fatal("second reply refused")
	}
	p.gen.mu.Lock()
	newCookie := p.gen.cookie
	p.gen.mu.Unlock()
	if newCookie == oldCookie {
		t.Fatal("secret was not rotated")
	}
	msg = p.initiation(t, late)
	if !p.chk.CheckMAC2(msg, srcA, late) {
		t.Error("fresh cookie after rotation refused")
	}
	// Within the lifetime, the secret is not rotated by further replies.
	r2, _ := p.chk.CreateReply(msg, 42, srcA, late.Add(time.Minute))
	if !p.gen.ConsumeReply(&r2, late.Add(time.Minute)) {
		t.Fatal("third reply refused")
	}
	p.gen.mu.Lock()
	same := p.gen.cookie == newCookie
	p.gen.mu.Unlock()
	if !same {
		t.Error("secret rotated before CookieRefreshTime")
	}
}

func TestCookieConcurrent(t *testing.T) {
	p := newMACPair(t)
	msg := p.initiation(t, p.t0)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				now := p.t0.Add(time.Duration(i) * time.Second)
				local := append([]byte(nil), msg...)
				p.gen.AddMACs(local, now)
				if !p.chk.CheckMAC1(local) {
					t.Error("mac1 rejected under concurrency")
					return
				}
				r, err := p.chk.CreateReply(local, 1, srcA, now)
				if err != nil {
					t.Error(err)
					return
				}
				p.gen.ConsumeReply(&r, now)
				p.chk.CheckMAC2(local, srcA, now)
			}
		}(g)
	}
	wg.Wait()
}
