package control

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wirelane/wirelane/ovpn/keys"
)

// KeyMethod2 is the key_method_2 message exchanged right after the TLS
// handshake: zero (4) | 2 | pre_master (48, client only) | random1 (32) |
// random2 (32) | options | username | password | peer-info, each string
// with a 16-bit length that counts its NUL (an empty string is 00 00).
type KeyMethod2 struct {
	PreMaster [keys.PreMasterLen]byte // client only
	Random1   [keys.RandomLen]byte
	Random2   [keys.RandomLen]byte
	Options   string
	Username  string
	Password  string
	PeerInfo  string
}

// NewKeyMethod2 fills the random fields from crypto/rand.
func NewKeyMethod2(client bool) (*KeyMethod2, error) {
	m := &KeyMethod2{}
	if client {
		if _, err := rand.Read(m.PreMaster[:]); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(m.Random1[:]); err != nil {
		return nil, err
	}
	if _, err := rand.Read(m.Random2[:]); err != nil {
		return nil, err
	}
	return m, nil
}

func appendString(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0, 0)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)+1))
	b = append(b, s...)
	return append(b, 0)
}

// Marshal encodes the message as sent by a client (client true, with
// pre_master) or a server.
func (m *KeyMethod2) Marshal(client bool) []byte {
	b := []byte{0, 0, 0, 0, 2}
	if client {
		b = append(b, m.PreMaster[:]...)
	}
	b = append(b, m.Random1[:]...)
	b = append(b, m.Random2[:]...)
	b = appendString(b, m.Options)
	b = appendString(b, m.Username)
	b = appendString(b, m.Password)
	return appendString(b, m.PeerInfo)
}

// ErrKeyMethod is returned for malformed key_method_2 messages.
var ErrKeyMethod = errors.New("control: bad key_method_2 message")

// ParseKeyMethod2 decodes a message sent by a client (fromClient true) or a
// server. Username, password and peer-info are optional at the end.
func ParseKeyMethod2(b []byte, fromClient bool) (*KeyMethod2, error) {
	m := &KeyMethod2{}
	if len(b) < 5 || b[0]|b[1]|b[2]|b[3] != 0 || b[4] != 2 {
		return nil, fmt.Errorf("%w: header %x", ErrKeyMethod, b[:min(len(b), 5)])
	}
	b = b[5:]
	need := 2 * keys.RandomLen
	if fromClient {
		need += keys.PreMasterLen
	}
	if len(b) < need {
		return nil, fmt.Errorf("%w: %d bytes of key source, want %d", ErrKeyMethod, len(b), need)
	}
	if fromClient {
		b = b[copy(m.PreMaster[:], b):]
	}
	b = b[copy(m.Random1[:], b):]
	b = b[copy(m.Random2[:], b):]
	for i, dst := range []*string{&m.Options, &m.Username, &m.Password, &m.PeerInfo} {
		if len(b) == 0 && i > 0 {
			break
		}
		s, rest, err := readString(b)
		if err != nil {
			return nil, fmt.Errorf("%w: field %d: %v", ErrKeyMethod, i, err)
		}
		*dst, b = s, rest
	}
	return m, nil
}

func readString(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, errors.New("missing length")
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 {
		return "", b, nil
	}
	if len(b) < n {
		return "", nil, fmt.Errorf("string of %d bytes, %d left", n, len(b))
	}
	s := b[:n]
	if s[n-1] == 0 {
		s = s[:n-1]
	}
	return string(s), b[n:], nil
}

// Wipe clears the secret fields.
func (m *KeyMethod2) Wipe() {
	clear(m.PreMaster[:])
	clear(m.Random1[:])
	clear(m.Random2[:])
	m.Password = ""
}
