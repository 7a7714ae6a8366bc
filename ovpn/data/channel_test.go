package data

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wirelane/wirelane/ovpn/wire"
)

var allCiphers = []Cipher{AES128GCM, AES256GCM, ChaCha20Poly1305}

func keyBytes(c Cipher, b byte) []byte { return bytes.Repeat([]byte{b}, c.KeyLen()) }

// pair returns a client and a server channel with mirrored keys.
func pair(t testing.TB, c Cipher, id uint8, peerID uint32) (cli, srv *Channel) {
	ivA, ivB := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, [8]byte{9, 9, 9, 9, 9, 9, 9, 9}
	kc, err := NewKey(id, c, keyBytes(c, 0xa), ivA, keyBytes(c, 0xb), ivB)
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := NewKey(id, c, keyBytes(c, 0xb), ivB, keyBytes(c, 0xa), ivA)
	cli, srv = NewChannel(peerID), NewChannel(peerID)
	cli.Install(kc)
	srv.Install(ks)
	return cli, srv
}

func seal(t *testing.T, ch *Channel, p []byte) []byte {
	t.Helper()
	buf := make([]byte, Headroom+len(p)+Tailroom)
	pkt, err := ch.EncryptPayload(buf, p)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(pkt), len(pkt)+Tailroom)
	copy(out, pkt)
	return out
}

func refAEAD(c Cipher, key []byte) cipher.AEAD {
	if c == ChaCha20Poly1305 {
		a, _ := chacha20poly1305.New(key)
		return a
	}
	b, _ := aes.NewCipher(key)
	a, _ := cipher.NewGCM(b)
	return a
}

// The packet layout checked by opening it with the reference AEAD directly:
// [4a 00 00 07][pid][tag][ct], nonce pid||iv, ad = header||pid.
func TestEncryptLayoutMatchesOpenVPN(t *testing.T) {
	for _, c := range allCiphers {
		cli, _ := pair(t, c, 2, 7)
		pkt := seal(t, cli, []byte("hello ip packet"))
		if pkt[0] != 0x4a || binary.BigEndian.Uint32(pkt)&0xFFFFFF != 7 {
			t.Fatalf("%v: header %x", c, pkt[:4])
		}
		if pid := binary.BigEndian.Uint32(pkt[4:]); pid != 1 {
			t.Fatalf("%v: first packet id %d", c, pid)
		}
		nonce := append(append([]byte{}, pkt[4:8]...), 1, 2, 3, 4, 5, 6, 7, 8)
		ct := append(append([]byte{}, pkt[24:]...), pkt[8:24]...)
		pt, err := refAEAD(c, keyBytes(c, 0xa)).Open(nil, nonce, ct, pkt[:8])
		if err != nil || string(pt) != "hello ip packet" {
			t.Fatalf("%v: reference open: %q %v", c, pt, err)
		}
	}
}

func TestRoundTripKindsAndReplay(t *testing.T) {
	for _, c := range allCiphers {
		cli, srv := pair(t, c, 0, 0)
		for i := 0; i < 3; i++ {
			pkt := seal(t, cli, []byte{0x45, byte(i)})
			p, kind, err := srv.Decrypt(pkt)
			if err != nil || kind != KindPacket || !bytes.Equal(p, []byte{0x45, byte(i)}) {
				t.Fatalf("%v: %x %v %v", c, p, kind, err)
			}
		}
		ping := seal(t, cli, PingPayload)
		replayed := append(make([]byte, 0, len(ping)+Tailroom), ping...)
		if _, kind, err := srv.Decrypt(ping); err != nil || kind != KindPing {
			t.Fatalf("ping: %v %v", kind, err)
		}
		if _, _, err := srv.Decrypt(replayed); !errors.Is(err, ErrReplay) {
			t.Fatalf("replay accepted: %v", err)
		}
		if _, kind, err := srv.Decrypt(seal(t, cli, OCCExitPayload)); err != nil || kind != KindExit {
			t.Fatalf("exit: %v %v", kind, err)
		}
		bad := seal(t, cli, []byte("x"))
		bad[len(bad)-1] ^= 1
		if _, _, err := srv.Decrypt(bad); !errors.Is(err, ErrAuth) {
			t.Fatalf("tampered packet: %v", err)
		}
		bad = seal(t, cli, []byte("x"))
		bad[3] ^= 1 // peer-id is authenticated
		if _, _, err := srv.Decrypt(bad); !errors.Is(err, ErrAuth) {
			t.Fatalf("tampered header: %v", err)
		}
	}
}

func TestDataV1(t *testing.T) {
	cli, srv := pair(t, AES256GCM, 1, wire.UndefinedPeerID)
	pkt := seal(t, cli, []byte("v1"))
	if pkt[0] != 0x31 || len(pkt) != 1+4+16+2 {
		t.Fatalf("DATA_V1 packet %x", pkt)
	}
	if p, _, err := srv.Decrypt(pkt); err != nil || string(p) != "v1" {
		t.Fatalf("%q %v", p, err)
	}
}

func TestReplayWindow(t *testing.T) {
	var w replayWindow
	accept := func(id uint32) bool {
		if !w.check(id) {
			return false
		}
		w.update(id)
		return true
	}
	for _, c := range []struct {
		id   uint32
		want bool
	}{{0, false}, {1, true}, {1, false}, {5, true}, {3, true}, {3, false}, {2, true}, {100, true}, {37, true}, {36, false}, {37, false}, {99, true}, {100, false}, {1000, true}, {937, true}, {936, false}} {
		if got := accept(c.id); got != c.want {
			t.Fatalf("id %d: accepted=%v want %v", c.id, got, c.want)
		}
	}
}

func TestKeySlots(t *testing.T) {
	cli, srv := pair(t, AES256GCM, 0, 0)
	old := seal(t, cli, []byte("old key"))
	// Renegotiate: key id 1 becomes primary on both sides.
	c1, _ := NewKey(1, AES256GCM, keyBytes(AES256GCM, 1), [8]byte{}, keyBytes(AES256GCM, 2), [8]byte{})
	s1, _ := NewKey(1, AES256GCM, keyBytes(AES256GCM, 2), [8]byte{}, keyBytes(AES256GCM, 1), [8]byte{})
	srv.Prepare(s1) // receive-only until installed
	if p, _, err := srv.Decrypt(seal(t, cli, []byte("still old"))); err != nil || string(p) != "still old" {
		t.Fatalf("primary lost by Prepare: %v", err)
	}
	if k := srv.Primary(); k.ID != 0 {
		t.Fatalf("Prepare changed the send key to %d", k.ID)
	}
	cli.Install(c1)
	newPkt := seal(t, cli, []byte("new key"))
	if newPkt[0]&7 != 1 {
		t.Fatalf("sent with key id %d", newPkt[0]&7)
	}
	if p, _, err := srv.Decrypt(newPkt); err != nil || string(p) != "new key" {
		t.Fatal(err)
	}
	srv.Install(s1)
	if k := srv.Primary(); k.ID != 1 {
		t.Fatalf("send key %d after Install", k.ID)
	}
	if p, _, err := srv.Decrypt(old); err != nil || string(p) != "old key" {
		t.Fatalf("lame duck key not used: %v", err)
	}
	srv.DropSecondary(time.Now().Add(30*time.Second), time.Minute)
	if _, _, err := srv.Decrypt(seal(t, NewChannelWith(t, 0), []byte("x"))); errors.Is(err, ErrNoKey) {
		t.Fatal("lame duck dropped inside the transition window")
	}
	srv.DropSecondary(time.Now().Add(time.Hour), time.Minute)
	if _, _, err := srv.Decrypt(seal(t, NewChannelWith(t, 0), []byte("x"))); !errors.Is(err, ErrNoKey) {
		t.Fatalf("dropped key still used: %v", err)
	}
}

// NewChannelWith returns a channel whose only key has id kid.
func NewChannelWith(t *testing.T, kid uint8) *Channel {
	k, _ := NewKey(kid, AES256GCM, keyBytes(AES256GCM, 0xa), [8]byte{}, keyBytes(AES256GCM, 0xb), [8]byte{})
	ch := NewChannel(0)
	ch.Install(k)
	return ch
}

func TestRoomAndShortErrors(t *testing.T) {
	cli, srv := pair(t, AES256GCM, 0, 0)
	if _, err := cli.Encrypt(make([]byte, Headroom+10), 10); !errors.Is(err, ErrRoom) {
		t.Fatalf("no tailroom: %v", err)
	}
	if _, _, err := srv.Decrypt(append(make([]byte, 0, 100), 0x48, 0, 0, 0, 1)); !errors.Is(err, ErrShort) {
		t.Fatalf("short: %v", err)
	}
	pkt := seal(t, cli, []byte("x"))
	if _, _, err := srv.Decrypt(pkt[:len(pkt):len(pkt)]); !errors.Is(err, ErrRoom) {
		t.Fatalf("no tailroom on decrypt: %v", err)
	}
	if _, err := ParseCipher("BF-CBC"); err == nil {
		t.Fatal("BF-CBC accepted")
	}
}

func TestNoAllocations(t *testing.T) {
	cli, srv := pair(t, AES256GCM, 0, 0)
	buf := make([]byte, 2048)
	rbuf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(100, func() {
		pkt, err := cli.Encrypt(buf, 1400)
		if err != nil {
			t.Fatal(err)
		}
		n := copy(rbuf, pkt)
		if _, _, err := srv.Decrypt(rbuf[:n]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}

func FuzzDecrypt(f *testing.F) {
	f.Add([]byte{0x48, 0, 0, 0, 0, 0, 0, 1})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, srv := pair(t, AES256GCM, 0, 0)
		pkt := append(make([]byte, 0, len(b)+Tailroom), b...)
		_, _, _ = srv.Decrypt(pkt)
	})
}

func benchmark(b *testing.B, c Cipher, size int) {
	cli, srv := pair(b, c, 0, 0)
	buf := make([]byte, 2048)
	rbuf := make([]byte, 2048)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		pkt, err := cli.Encrypt(buf, size)
		if err != nil {
			b.Fatal(err)
		}
		n := copy(rbuf, pkt)
		if _, _, err := srv.Decrypt(rbuf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRoundTripAES256GCM1400(b *testing.B) { benchmark(b, AES256GCM, 1400) }
func BenchmarkRoundTripChaCha1400(b *testing.B)    { benchmark(b, ChaCha20Poly1305, 1400) }
