package noise

// Live interoperability with the reference Go implementation: a
// golang.zx2c4.com/wireguard device runs in-process on an in-memory TUN and
// an in-memory bind, and this package plays its peer, byte for byte, in both
// roles. Passing traffic proves the handshake, mac1 and the session key
// split agree with the reference.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// refPeer is a reference device and our side of its in-memory link.
type refPeer struct {
	dev      *device.Device
	tun      *tuntest.ChannelTUN
	ours     conn.Bind
	in       chan []byte   // datagrams the device sent us
	toRef    conn.Endpoint // where our packets must go to reach the device
	refLocal *Local        // the device's identity, for our generator/checker
	me       *Local
	psk      PresharedKey
	refAddr  netip.Addr // inner addresses
	myAddr   netip.Addr
}

func startRefPeer(t *testing.T, psk PresharedKey) *refPeer {
	t.Helper()
	refKey, _ := GeneratePrivateKey()
	myKey, _ := GeneratePrivateKey()
	binds := bindtest.NewChannelBinds()
	r := &refPeer{
		tun: tuntest.NewChannelTUN(), ours: binds[1], refLocal: NewLocal(refKey), me: NewLocal(myKey), psk: psk,
		refAddr: netip.MustParseAddr("10.9.0.1"), myAddr: netip.MustParseAddr("10.9.0.2"),
	}
	r.dev = device.NewDevice(r.tun.TUN(), binds[0], device.NewLogger(device.LogLevelSilent, ""))
	t.Cleanup(r.dev.Close)
	// Endpoint 3 is the channel from the device's bind to ours (see bindtest).
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=0\npublic_key=%s\npreshared_key=%s\nendpoint=127.0.0.1:3\nallowed_ip=%s/32\n",
		hexKey(refKey), hexKey(r.me.PublicKey()), hexKey(psk), r.myAddr)
	if err := r.dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := r.dev.Up(); err != nil {
		t.Fatal(err)
	}
	recv, _, err := r.ours.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ours.Close() })
	r.in = make(chan []byte, 64)
	for _, fn := range recv {
		go func() {
			for {
				bufs := [][]byte{make([]byte, 2048)}
				sizes := []int{0}
				eps := []conn.Endpoint{nil}
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					return // bind closed
				}
				if n == 1 {
					r.in <- bufs[0][:sizes[0]]
				}
			}
		}()
	}
	if r.toRef, err = r.ours.ParseEndpoint("127.0.0.1:4"); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *refPeer) send(t *testing.T, b []byte) {
	t.Helper()
	if err := r.ours.Send([][]byte{b}, r.toRef); err != nil {
		t.Fatal(err)
	}
}

// receive returns the next datagram the device sent us.
func (r *refPeer) receive(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-r.in:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram from the reference device")
		return nil
	}
}

// sealTransport encrypts an inner packet as a transport message.
func sealTransport(s *Session, counter uint64, inner []byte) []byte {
	padded := (len(inner) + 15) &^ 15
	b := make([]byte, MessageTransportHeaderSize, MessageTransportHeaderSize+padded+AEADTagSize)
	PutTransportHeader(b, s.RemoteIndex, counter)
	plain := make([]byte, padded)
	copy(plain, inner)
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], counter)
	return s.Send.Seal(b, nonce[:], plain, nil)
}

// openTransport decrypts a transport message, returning the padded plaintext.
func openTransport(t *testing.T, s *Session, b []byte) []byte {
	t.Helper()
	recv, counter, ok := ParseTransportHeader(b)
	if !ok || recv != s.LocalIndex {
		t.Fatalf("not a transport message for index %d: % x", s.LocalIndex, b[:min(len(b), 16)])
	}
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], counter)
	plain, err := s.Receive.Open(nil, nonce[:], b[MessageTransportHeaderSize:], nil)
	if err != nil {
		t.Fatalf("decrypting the device's transport message: %v", err)
	}
	return plain
}

// exchangeTraffic checks both session keys against the device's.
func (r *refPeer) exchangeTraffic(t *testing.T, s *Session, counter uint64) {
	t.Helper()
	ping := tuntest.Ping(r.refAddr, r.myAddr)
	r.send(t, sealTransport(s, counter, ping))
	select {
	case got := <-r.tun.Inbound:
		if !bytes.Equal(got, ping) {
			t.Fatalf("device decrypted % x, want % x", got, ping)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("device did not deliver our transport packet")
	}
	back := tuntest.Ping(r.myAddr, r.refAddr)
	r.tun.Outbound <- back
	for {
		b := r.receive(t)
		if MessageType(b) != MessageTransportType {
			continue
		}
		plain := openTransport(t, s, b)
		if len(plain) == 0 {
			continue // keepalive
		}
		if !bytes.HasPrefix(plain, back) {
			t.Fatalf("decrypted % x, want prefix % x", plain, back)
		}
		return
	}
}

func TestInteropWeInitiate(t *testing.T) {
	psk, _ := GeneratePresharedKey()
	for _, tt := range []struct {
		name string
		psk  PresharedKey
	}{{"no preshared key", PresharedKey{}}, {"preshared key", psk}} {
		t.Run(tt.name, func(t *testing.T) {
			r := startRefPeer(t, tt.psk)
			h := NewHandshake(r.me, r.refLocal.PublicKey(), tt.psk)
			gen := NewCookieGenerator(r.refLocal.PublicKey())
			now := time.Now()
			ini, err := h.CreateInitiation(0x1234, now)
			if err != nil {
				t.Fatal(err)
			}
			wire := ini.MarshalTo(nil)
			gen.AddMACs(wire, now)
			r.send(t, wire)

			b := r.receive(t)
			if !NewCookieChecker(r.me).CheckMAC1(b) {
				t.Fatal("our checker rejects the device's mac1")
			}
			var res MessageResponse
			if err := res.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			if _, err := ConsumeResponse(r.me, &res, func(i uint32) *Handshake {
				if i == 0x1234 {
					return h
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			s, err := h.DeriveSession(now)
			if err != nil {
				t.Fatal(err)
			}
			r.exchangeTraffic(t, s, 0)
		})
	}
}

func TestInteropDeviceInitiates(t *testing.T) {
	psk, _ := GeneratePresharedKey()
	r := startRefPeer(t, psk)
	// A packet for us makes the device start a handshake.
	first := tuntest.Ping(r.myAddr, r.refAddr)
	go func() { r.tun.Outbound <- first }()

	b := r.receive(t)
	chk := NewCookieChecker(r.me)
	if !chk.CheckMAC1(b) {
		t.Fatal("our checker rejects the device's initiation mac1")
	}
	var ini MessageInitiation
	if err := ini.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	h := NewHandshake(r.me, r.refLocal.PublicKey(), psk)
	now := time.Now()
	if _, err := ConsumeInitiation(r.me, &ini, now, func(k PublicKey) *Handshake {
		if k == r.refLocal.PublicKey() {
			return h
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := h.CreateResponse(0xabcd)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.DeriveSession(now)
	if err != nil {
		t.Fatal(err)
	}
	wire := res.MarshalTo(nil)
	NewCookieGenerator(r.refLocal.PublicKey()).AddMACs(wire, now)
	r.send(t, wire)

	// The device now sends the queued packet with the new keys.
	for {
		b := r.receive(t)
		if MessageType(b) != MessageTransportType {
			continue
		}
		plain := openTransport(t, s, b)
		if len(plain) == 0 {
			continue
		}
		if !bytes.HasPrefix(plain, first) {
			t.Fatalf("decrypted % x, want % x", plain, first)
		}
		break
	}
	// As responder we must not send first; now that the device has, the
	// session carries traffic both ways.
	r.exchangeTraffic(t, s, 0)
}

// TestInteropCookies runs our MAC and cookie code against the reference's
// exported CookieChecker and CookieGenerator, in both roles.
func TestInteropCookies(t *testing.T) {
	ki, _ := GeneratePrivateKey()
	kr, _ := GeneratePrivateKey()
	initiator, responder := NewLocal(ki), NewLocal(kr)
	now := time.Now()
	src := netip.MustParseAddrPort("203.0.113.5:40000")
	srcBytes, n := sourceBytes(src)
	h := NewHandshake(initiator, responder.PublicKey(), PresharedKey{})
	newMsg := func() []byte {
		ini, err := h.CreateInitiation(1, now)
		if err != nil {
			t.Fatal(err)
		}
		return ini.MarshalTo(nil)
	}
	toRefReply := func(r MessageCookieReply) *device.MessageCookieReply {
		return &device.MessageCookieReply{Type: MessageCookieReplyType, Receiver: r.Receiver, Nonce: r.Nonce, Cookie: r.Cookie}
	}

	t.Run("reference initiator, our responder", func(t *testing.T) {
		var gen device.CookieGenerator
		gen.Init(device.NoisePublicKey(responder.PublicKey()))
		chk := NewCookieChecker(responder)
		msg := newMsg()
		gen.AddMacs(msg)
		if !chk.CheckMAC1(msg) {
			t.Fatal("our checker rejects the reference's mac1")
		}
		reply, err := chk.CreateReply(msg, 1, src, now)
		if err != nil {
			t.Fatal(err)
		}
		if !gen.ConsumeReply(toRefReply(reply)) {
			t.Fatal("the reference refuses our cookie reply")
		}
		msg = newMsg()
		gen.AddMacs(msg)
		if !chk.CheckMAC1(msg) || !chk.CheckMAC2(msg, src, now) {
			t.Fatal("our checker rejects the reference's mac2")
		}
	})

	t.Run("our initiator, reference responder", func(t *testing.T) {
		var chk device.CookieChecker
		chk.Init(device.NoisePublicKey(responder.PublicKey()))
		gen := NewCookieGenerator(responder.PublicKey())
		msg := newMsg()
		gen.AddMACs(msg, now)
		if !chk.CheckMAC1(msg) {
			t.Fatal("the reference rejects our mac1")
		}
		reply, err := chk.CreateReply(msg, 1, srcBytes[:n])
		if err != nil {
			t.Fatal(err)
		}
		var ours MessageCookieReply
		ours.Receiver, ours.Nonce, ours.Cookie = reply.Receiver, reply.Nonce, reply.Cookie
		if !gen.ConsumeReply(&ours, now) {
			t.Fatal("we refuse the reference's cookie reply")
		}
		msg = newMsg()
		gen.AddMACs(msg, now)
		if !chk.CheckMAC1(msg) || !chk.CheckMAC2(msg, srcBytes[:n]) {
			t.Fatal("the reference rejects our mac2")
		}
	})
}
