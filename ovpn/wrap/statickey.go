package wrap

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
)

// StaticKeyLen is the size of an OpenVPN static key (2048 bits).
const StaticKeyLen = 256

// StaticKey is an "OpenVPN Static key V1".
type StaticKey [StaticKeyLen]byte

const (
	staticBegin = "-----BEGIN OpenVPN Static key V1-----"
	staticEnd   = "-----END OpenVPN Static key V1-----"
)

// ParseStaticKey parses the text of a static key file. Errors name the line.
func ParseStaticKey(text []byte) (*StaticKey, error) {
	var k StaticKey
	var hexData []byte
	state := 0 // 0 before begin, 1 inside, 2 after end
	sc := bufio.NewScanner(bytes.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		switch {
		case state == 0 && s == staticBegin:
			state = 1
		case state == 0:
			// Comments and blank lines before the key are allowed.
		case state == 1 && s == staticEnd:
			state = 2
		case state == 1:
			b, err := hex.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("static key line %d: not hex: %q", line, s)
			}
			hexData = append(hexData, b...)
		case state == 2 && s != "":
			return nil, fmt.Errorf("static key line %d: data after %s", line, staticEnd)
		}
	}
	switch {
	case state == 0:
		return nil, fmt.Errorf("static key: no %q line", staticBegin)
	case state == 1:
		return nil, fmt.Errorf("static key: no %q line", staticEnd)
	case len(hexData) != StaticKeyLen:
		return nil, fmt.Errorf("static key: %d bytes, want %d", len(hexData), StaticKeyLen)
	}
	copy(k[:], hexData)
	clear(hexData)
	return &k, nil
}

// Format returns the key in OpenVPN's file format.
func (k *StaticKey) Format() []byte {
	var b bytes.Buffer
	b.WriteString(staticBegin + "\n")
	for i := 0; i < StaticKeyLen; i += 16 {
		b.WriteString(hex.EncodeToString(k[i:i+16]) + "\n")
	}
	b.WriteString(staticEnd + "\n")
	return b.Bytes()
}

// half returns key half i: cipher(64) | hmac(64).
func (k *StaticKey) half(i int) (cipherKey, hmacKey []byte) {
	h := k[i*128 : i*128+128]
	return h[:64], h[64:]
}
