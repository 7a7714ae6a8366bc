// Package keys derives OpenVPN data-channel key material: either with TLS
// keying-material export (tls-ekm, OpenVPN 2.6 default with 2.6 peers) or
// with OpenVPN's older TLS 1.0 PRF key expansion (MD5 xor SHA1), and splits
// the 256 bytes into per-direction cipher keys and implicit IVs.
//
//	tls-ekm:  material = ExportKeyingMaterial("EXPORTER-OpenVPN-datakeys", nil, 256)
//	PRF:      master   = PRF(pre_master, "OpenVPN master secret", c.random1 | s.random1, 48)
//	          material = PRF(master, "OpenVPN key expansion",
//	                         c.random2 | s.random2 | c.session | s.session, 256)
//	split:    material = key[0] | key[1], each cipher(64) | hmac(64)
//	          client sends with key[0], receives with key[1]; server the reverse
package keys

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"hash"
)

// Sizes used by the key exchange.
const (
	MaterialLen   = 256 // bytes of data-channel key material
	PreMasterLen  = 48
	RandomLen     = 32
	SessionIDLen  = 8
	halfLen       = 128
	cipherKeyArea = 64
	masterLen     = 48
)

// EKMLabel is the TLS exporter label OpenVPN uses for data keys.
const EKMLabel = "EXPORTER-OpenVPN-datakeys"

// Exporter is satisfied by tls.ConnectionState.ExportKeyingMaterial.
type Exporter func(label string, context []byte, length int) ([]byte, error)

// Material is 256 bytes of data-channel key material.
type Material [MaterialLen]byte

// FromEKM derives the material with TLS keying-material export.
func FromEKM(export Exporter) (Material, error) {
	var m Material
	b, err := export(EKMLabel, nil, MaterialLen)
	if err != nil {
		return m, err
	}
	copy(m[:], b)
	return m, nil
}

// Sources holds the key_method_2 random values of both sides and the
// session ids, as needed by the PRF method.
type Sources struct {
	PreMaster                    [PreMasterLen]byte // sent by the client
	ClientRandom1, ClientRandom2 [RandomLen]byte
	ServerRandom1, ServerRandom2 [RandomLen]byte
	ClientSession, ServerSession [SessionIDLen]byte
}

// FromPRF derives the material with OpenVPN's TLS 1.0 PRF key expansion.
func FromPRF(s *Sources) Material {
	var seed []byte
	seed = append(seed, s.ClientRandom1[:]...)
	seed = append(seed, s.ServerRandom1[:]...)
	master := PRF(s.PreMaster[:], "OpenVPN master secret", seed, masterLen)
	seed = seed[:0]
	seed = append(seed, s.ClientRandom2[:]...)
	seed = append(seed, s.ServerRandom2[:]...)
	seed = append(seed, s.ClientSession[:]...)
	seed = append(seed, s.ServerSession[:]...)
	var m Material
	copy(m[:], PRF(master, "OpenVPN key expansion", seed, MaterialLen))
	clear(master)
	return m
}

// PRF is the TLS 1.0 pseudo-random function (RFC 2246 section 5): the
// secret is split in two halves, P_MD5 of the first is XORed with P_SHA1 of
// the second.
func PRF(secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	half := (len(secret) + 1) / 2
	out := pHash(md5.New, secret[:half], ls, n)
	sh := pHash(sha1.New, secret[len(secret)-half:], ls, n)
	for i := range out {
		out[i] ^= sh[i]
	}
	return out
}

// pHash is P_hash: A(0) = seed, A(i) = HMAC(secret, A(i-1)), output =
// HMAC(secret, A(1)|seed) | HMAC(secret, A(2)|seed) | ...
func pHash(h func() hash.Hash, secret, seed []byte, n int) []byte {
	mac := hmac.New(h, secret)
	mac.Write(seed)
	a := mac.Sum(nil)
	out := make([]byte, 0, n+mac.Size())
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(seed)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:n]
}

// Direction is one direction's key: a cipher key and the implicit IV for
// AEAD ciphers, or the HMAC key for CBC ciphers.
type Direction struct {
	Key        []byte // cipher key, keyLen bytes
	ImplicitIV [8]byte
	// MAC is the whole HMAC half (64 bytes); a CBC cipher's HMAC uses
	// its first digest-size bytes.
	MAC []byte
}

// Split returns the send and receive keys for a cipher with keyLen-byte
// keys. client selects the client's view (send with key[0]).
func (m *Material) Split(keyLen int, client bool) (send, recv Direction) {
	k0, k1 := m[:halfLen], m[halfLen:]
	if !client {
		k0, k1 = k1, k0
	}
	mk := func(k []byte) Direction {
		d := Direction{Key: append([]byte(nil), k[:keyLen]...), MAC: append([]byte(nil), k[cipherKeyArea:halfLen]...)}
		copy(d.ImplicitIV[:], k[cipherKeyArea:cipherKeyArea+8])
		return d
	}
	return mk(k0), mk(k1)
}

// Wipe zeroes the material.
func (m *Material) Wipe() { clear(m[:]) }
