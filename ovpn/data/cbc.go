package data

// The legacy data channel: AES-128-CBC or AES-256-CBC with an HMAC
// (OpenVPN's encrypt-then-MAC of openvpn_encrypt_v1), for servers older
// than 2.4 or configured without AEAD ciphers. Only a file that names such
// a cipher gets it (config warns). Its weaknesses against the AEAD
// channel: the opcode and peer-id header is not authenticated, the MAC is
// as strong as `auth` (SHA1 by default: a 160-bit tag), a random IV and
// padding cost up to 32 bytes a packet, and it is slower.
//
//	[op|kid|peer-id (4) or op|kid (1)] [HMAC (digest size)] [IV (16)]
//	    [AES-CBC(packet-id (4) || framed payload || PKCS#7 padding)]
//	HMAC = HMAC(auth, key.hmac[:digest size], IV || ciphertext)
//
// Send: the packet-id is written before the payload, the padding after,
// the block encrypted in place with an unpredictable IV (the packet-id
// and a random per-key salt encrypted with the key), then the HMAC.
// Receive: the HMAC is checked (constant time) before anything is
// decrypted, then the padding, then the packet-id against the replay
// window. Block modes and HMAC states are pooled per direction, so
// neither direction allocates once warm.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

const (
	cbcBlock = aes.BlockSize
	// maxDigest is the largest HMAC (SHA512).
	maxDigest = 64
)

// ivSetter is the block modes' SetIV (crypto/cipher's CBC modes have it),
// so one mode is reused for every packet.
type ivSetter interface {
	cipher.BlockMode
	SetIV([]byte)
}

// cbcState is what one packet in one direction needs; pooled.
type cbcState struct {
	mode ivSetter
	mac  hash.Hash
	sum  [maxDigest]byte
}

// cbcDir is one direction of a CBC key.
type cbcDir struct {
	size  int          // digest size
	pool  sync.Pool    // *cbcState
	block cipher.Block // the key's AES, for the IVs (send only)
	salt  [12]byte     // random per key: the IV input after the packet-id (send only)
}

func newCBCDir(key, macKey []byte, digest func() hash.Hash, encrypt bool) (*cbcDir, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	size := digest().Size()
	if size > maxDigest || len(macKey) < size {
		return nil, fmt.Errorf("data: HMAC key of %d bytes for a %d-byte digest", len(macKey), size)
	}
	mk := append([]byte(nil), macKey[:size]...)
	d := &cbcDir{size: size, block: b}
	if _, err := rand.Read(d.salt[:]); err != nil {
		return nil, err
	}
	zero := make([]byte, cbcBlock)
	d.pool.New = func() any {
		var m cipher.BlockMode
		if encrypt {
			m = cipher.NewCBCEncrypter(b, zero)
		} else {
			m = cipher.NewCBCDecrypter(b, zero)
		}
		return &cbcState{mode: m.(ivSetter), mac: hmac.New(digest, mk)}
	}
	// Fail now, not on the first packet, if the mode cannot be reused.
	st, ok := func() (st *cbcState, ok bool) {
		defer func() { ok = recover() == nil }()
		return d.pool.New().(*cbcState), true
	}()
	if !ok {
		return nil, fmt.Errorf("data: the CBC mode cannot take a new IV")
	}
	d.pool.Put(st)
	return d, nil
}

// NewCBCKey builds a key slot for AES128CBC or AES256CBC: the cipher keys
// and the HMAC keys (at least the digest's size; digest is `auth`'s hash,
// e.g. sha1.New) of each direction.
func NewCBCKey(id uint8, c Cipher, digest func() hash.Hash, sendKey, sendMAC, recvKey, recvMAC []byte) (*Key, error) {
	if c.AEAD() {
		return nil, fmt.Errorf("data: %v is not a CBC cipher", c)
	}
	if len(sendKey) != c.KeyLen() || len(recvKey) != c.KeyLen() {
		return nil, fmt.Errorf("data: %v needs %d-byte keys", c, c.KeyLen())
	}
	s, err := newCBCDir(sendKey, sendMAC, digest, true)
	if err != nil {
		return nil, err
	}
	r, err := newCBCDir(recvKey, recvMAC, digest, false)
	if err != nil {
		return nil, err
	}
	return &Key{ID: id & wire.KeyIDMask, Cipher: c, Created: time.Now(), sendCBC: s, recvCBC: r}, nil
}

// encryptCBC seals the plaintext buf[pt:end] (framed payload) and returns
// the packet's start and end in buf. Headroom and Tailroom leave room
// for the header, HMAC, IV, packet-id and padding.
func (c *Channel) encryptCBC(k *Key, buf []byte, pt, end int, pid uint32) (int, int, error) {
	d := k.sendCBC
	ptStart := pt - 4
	binary.BigEndian.PutUint32(buf[ptStart:], pid)
	pad := cbcBlock - (end-ptStart)%cbcBlock
	if end+pad > len(buf) {
		return 0, 0, ErrRoom
	}
	for i := 0; i < pad; i++ {
		buf[end+i] = byte(pad)
	}
	end += pad
	ivAt := ptStart - cbcBlock
	macAt := ivAt - d.size
	start := macAt - 4
	if c.peerID == wire.UndefinedPeerID {
		start = macAt - 1
	}
	if start < 0 {
		return 0, 0, ErrRoom
	}
	// The IV: the packet-id and the key's salt encrypted with the key
	// (NIST SP 800-38A, appendix C): unpredictable without the key,
	// never repeated under it, and no system call per packet.
	iv := buf[ivAt:ptStart]
	binary.BigEndian.PutUint32(iv, pid)
	copy(iv[4:], d.salt[:])
	d.block.Encrypt(iv, iv)
	st := d.pool.Get().(*cbcState)
	st.mode.SetIV(iv)
	st.mode.CryptBlocks(buf[ptStart:end], buf[ptStart:end])
	st.mac.Reset()
	st.mac.Write(buf[ivAt:end])
	copy(buf[macAt:ivAt], st.mac.Sum(st.sum[:0]))
	d.pool.Put(st)
	c.putHeader(buf, start, k.ID)
	return start, end, nil
}

// decryptCBC checks and opens a CBC packet whose header is hdr bytes
// long, in place, and returns the framed payload.
func decryptCBC(k *Key, pkt []byte, hdr int) ([]byte, error) {
	d := k.recvCBC
	body := pkt[hdr:]
	if len(body) < d.size+2*cbcBlock || (len(body)-d.size)%cbcBlock != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrShort, len(pkt))
	}
	st := d.pool.Get().(*cbcState)
	defer d.pool.Put(st)
	st.mac.Reset()
	st.mac.Write(body[d.size:])
	if subtle.ConstantTimeCompare(st.mac.Sum(st.sum[:0]), body[:d.size]) != 1 {
		return nil, ErrAuth
	}
	iv, ct := body[d.size:d.size+cbcBlock], body[d.size+cbcBlock:]
	st.mode.SetIV(iv)
	st.mode.CryptBlocks(ct, ct)
	// Encrypt-then-MAC: the padding of an authenticated packet is the
	// peer's, so checking it openly reveals nothing.
	pad := int(ct[len(ct)-1])
	if pad == 0 || pad > cbcBlock || pad > len(ct)-4 {
		return nil, ErrAuth
	}
	for _, b := range ct[len(ct)-pad:] {
		if int(b) != pad {
			return nil, ErrAuth
		}
	}
	pid := binary.BigEndian.Uint32(ct)
	k.mu.Lock()
	ok := k.replay.check(pid)
	if ok {
		k.replay.update(pid)
		k.heard = true
	}
	k.mu.Unlock()
	if !ok {
		return nil, ErrReplay
	}
	return ct[4 : len(ct)-pad], nil
}
