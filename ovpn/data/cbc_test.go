package data

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"hash"
	"testing"
)

var cbcCiphers = []Cipher{AES128CBC, AES256CBC}

var digests = map[string]func() hash.Hash{"SHA1": sha1.New, "SHA256": sha256.New, "SHA512": sha512.New}

func macKey(b byte) []byte { return bytes.Repeat([]byte{b}, 64) }

// cbcPair returns a client and a server channel with mirrored CBC keys.
func cbcPair(t testing.TB, c Cipher, digest func() hash.Hash, peerID uint32, f Framing) (cli, srv *Channel) {
	kc, err := NewCBCKey(1, c, digest, keyBytes(c, 0xa), macKey(0xc), keyBytes(c, 0xb), macKey(0xd))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := NewCBCKey(1, c, digest, keyBytes(c, 0xb), macKey(0xd), keyBytes(c, 0xa), macKey(0xc))
	if err != nil {
		t.Fatal(err)
	}
	cli, srv = NewFramedChannel(peerID, f), NewFramedChannel(peerID, f)
	cli.Install(kc)
	srv.Install(ks)
	return cli, srv
}

// The packet layout checked with an independent HMAC and CBC decryption:
// [header][HMAC over IV||ct][IV][CBC(pid || payload || PKCS#7)], the
// header outside the HMAC, packet ids from 1.
func TestCBCLayoutMatchesOpenVPN(t *testing.T) {
	for _, c := range cbcCiphers {
		for name, digest := range digests {
			for _, peerID := range []uint32{7, 0xFFFFFF} {
				cli, _ := cbcPair(t, c, digest, peerID, FramingNone)
				payload := []byte("hello ip packet")
				for want := uint32(1); want <= 2; want++ {
					pkt := seal(t, cli, payload)
					hdr := 4
					if peerID == 0xFFFFFF {
						hdr = 1
						if pkt[0] != 6<<3|1 {
							t.Fatalf("%v: DATA_V1 header %x", c, pkt[0])
						}
					} else if pkt[0] != 9<<3|1 || binary.BigEndian.Uint32(pkt)&0xFFFFFF != 7 {
						t.Fatalf("%v: DATA_V2 header %x", c, pkt[:4])
					}
					size := digest().Size()
					m := hmac.New(digest, macKey(0xc)[:size])
					m.Write(pkt[hdr+size:])
					if !hmac.Equal(m.Sum(nil), pkt[hdr:hdr+size]) {
						t.Fatalf("%v %s: HMAC does not cover IV||ciphertext", c, name)
					}
					b, _ := aes.NewCipher(keyBytes(c, 0xa))
					ct := append([]byte(nil), pkt[hdr+size+16:]...)
					cipher.NewCBCDecrypter(b, pkt[hdr+size:hdr+size+16]).CryptBlocks(ct, ct)
					pad := int(ct[len(ct)-1])
					if pid := binary.BigEndian.Uint32(ct); pid != want || !bytes.Equal(ct[4:len(ct)-pad], payload) || pad != 16-(4+len(payload))%16 {
						t.Fatalf("%v %s: plaintext % x", c, name, ct)
					}
				}
			}
		}
	}
}

// Round trips with every framing and payload size around the block
// boundaries; tampering anywhere after the header fails the HMAC; a
// replay is refused.
func TestCBCRoundTripTamperReplay(t *testing.T) {
	for _, c := range cbcCiphers {
		for _, f := range []Framing{FramingNone, FramingLZO, FramingSwap, FramingV2} {
			cli, srv := cbcPair(t, c, sha256.New, 3, f)
			for n := 0; n <= 40; n++ {
				p := bytes.Repeat([]byte{0x45 + byte(n)}, n)
				pkt := seal(t, cli, p)
				got, _, err := srv.Decrypt(append(make([]byte, 0, len(pkt)+Tailroom), pkt...))
				if err != nil || !bytes.Equal(got, p) {
					t.Fatalf("%v %v n=%d: %x %v", c, f, n, got, err)
				}
				if _, _, err := srv.Decrypt(append(make([]byte, 0, len(pkt)+Tailroom), pkt...)); !errors.Is(err, ErrReplay) {
					t.Fatalf("%v replay: %v", c, err)
				}
			}
			pkt := seal(t, cli, PingPayload)
			for i := 4; i < len(pkt); i++ {
				bad := append(make([]byte, 0, len(pkt)+Tailroom), pkt...)
				bad[i] ^= 0x40
				if _, _, err := srv.Decrypt(bad); !errors.Is(err, ErrAuth) {
					t.Fatalf("%v: byte %d flipped: %v", c, i, err)
				}
			}
			if _, kind, err := srv.Decrypt(append(make([]byte, 0, len(pkt)+Tailroom), pkt...)); err != nil || kind != KindPing {
				t.Fatalf("%v ping: %v %v", c, kind, err)
			}
			if _, _, err := srv.Decrypt(append(make([]byte, 0, 64), pkt[:30]...)); err == nil {
				t.Fatalf("%v: a truncated packet passed", c)
			}
		}
	}
}

func TestCBCNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector (sync.Pool drops items on purpose)")
	}
	cli, srv := cbcPair(t, AES256CBC, sha256.New, 1, FramingNone)
	buf := make([]byte, Headroom+1400+Tailroom)
	rx := make([]byte, 0, len(buf)+Tailroom)
	allocs := testing.AllocsPerRun(200, func() {
		pkt, err := cli.Encrypt(buf, 1400)
		if err != nil {
			t.Fatal(err)
		}
		rx = append(rx[:0], pkt...)
		if _, _, err := srv.Decrypt(rx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}

// FuzzDecryptCBC: arbitrary packets never panic, and only the peer's
// packets authenticate.
func FuzzDecryptCBC(f *testing.F) {
	cli, _ := cbcPair(f, AES128CBC, sha1.New, 0, FramingNone)
	buf := make([]byte, 256)
	pkt, _ := cli.EncryptPayload(buf, []byte("seed packet"))
	f.Add(append([]byte(nil), pkt...))
	f.Add([]byte{0x48, 0, 0, 0})
	f.Add(make([]byte, 60))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, srv := cbcPair(t, AES128CBC, sha1.New, 0, FramingNone)
		pkt := append(make([]byte, 0, len(b)+Tailroom), b...)
		_, _, _ = srv.Decrypt(pkt)
	})
}

func benchmarkCBC(b *testing.B, c Cipher, digest func() hash.Hash, size int) {
	cli, srv := cbcPair(b, c, digest, 0, FramingNone)
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

func BenchmarkRoundTripAES256CBCSHA1_1400(b *testing.B) { benchmarkCBC(b, AES256CBC, sha1.New, 1400) }
func BenchmarkRoundTripAES256CBCSHA256_1400(b *testing.B) {
	benchmarkCBC(b, AES256CBC, sha256.New, 1400)
}
func BenchmarkRoundTripAES128CBCSHA1_1400(b *testing.B) { benchmarkCBC(b, AES128CBC, sha1.New, 1400) }
