package data

import "testing"

// TestPrepareKeepsTheLameDuck: a renegotiation that starts before the peer
// has activated the previous one (its key-exchange ack was lost or late,
// so the peer still sends under the old key, our lame duck) prepares a
// third key; the lame duck must keep decrypting, or the peer's packets
// are lost until it activates. Found by ovpn/server TestRekeySoak under
// load.
func TestPrepareKeepsTheLameDuck(t *testing.T) {
	peer, ours := pair(t, AES256GCM, 0, 0) // key 0 on both
	k := func(id uint8, send, recv byte) *Key {
		key, err := NewKey(id, AES256GCM, keyBytes(AES256GCM, send), [8]byte{}, keyBytes(AES256GCM, recv), [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	// We renegotiated key 1 and send with it; the peer has not activated it.
	ours.Prepare(k(1, 2, 1))
	ours.Install(ours.next.Load())
	// The next renegotiation prepares key 2 while the peer still sends
	// under key 0.
	ours.Prepare(k(2, 4, 3))
	if p, _, err := ours.Decrypt(seal(t, peer, []byte("still key 0"))); err != nil || string(p) != "still key 0" {
		t.Fatalf("the lame duck no longer decrypts after Prepare: %v", err)
	}
	// The peer moves to key 1, then key 2: both decrypt.
	peer.Install(k(1, 1, 2))
	if p, _, err := ours.Decrypt(seal(t, peer, []byte("key 1"))); err != nil || string(p) != "key 1" {
		t.Fatalf("key 1: %v", err)
	}
	peer.Install(k(2, 3, 4))
	if p, _, err := ours.Decrypt(seal(t, peer, []byte("key 2"))); err != nil || string(p) != "key 2" {
		t.Fatalf("prepared key 2: %v", err)
	}
	ours.Install(ours.next.Load())
	if ours.next.Load() != nil || ours.Primary().ID != 2 || ours.secondary.Load().ID != 1 {
		t.Fatalf("slots after Install: primary %d, lame duck %v, next %v", ours.Primary().ID, ours.secondary.Load(), ours.next.Load())
	}
}

// TestKeyHeard: a key is heard once a packet under it decrypts and passes
// the replay window, not before, and not by a forgery.
func TestKeyHeard(t *testing.T) {
	peer, ours := pair(t, AES256GCM, 0, 0)
	k := ours.Primary()
	if k.Heard() {
		t.Fatal("heard before any packet")
	}
	pkt := seal(t, peer, []byte("hello"))
	bad := make([]byte, len(pkt), len(pkt)+Tailroom)
	copy(bad, pkt)
	bad[len(bad)-1] ^= 1
	if _, _, err := ours.Decrypt(bad); err == nil {
		t.Fatal("a forged packet decrypted")
	}
	if k.Heard() {
		t.Fatal("heard after a forged packet")
	}
	if _, _, err := ours.Decrypt(pkt); err != nil {
		t.Fatal(err)
	}
	if !k.Heard() {
		t.Fatal("not heard after a packet")
	}
}
