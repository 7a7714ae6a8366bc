package control

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"strings"
)

// maxRecord is more than one TLS record's plaintext.
const maxRecord = 1 << 15

// WriteMessage sends one NUL-terminated control message as one TLS record.
func WriteMessage(c *tls.Conn, msg string) error {
	_, err := c.Write(append([]byte(msg), 0))
	return err
}

// ReadKeyMethod2 reads the peer's key_method_2 message (one TLS record).
func ReadKeyMethod2(c *tls.Conn, fromClient bool) (*KeyMethod2, error) {
	buf := make([]byte, maxRecord)
	n, err := c.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("control: reading key_method_2: %w", err)
	}
	return ParseKeyMethod2(buf[:n], fromClient)
}

// MessageReader splits the TLS plaintext into NUL-terminated messages.
type MessageReader struct {
	c   *tls.Conn
	buf []byte
	tmp []byte
}

// NewMessageReader reads messages from c.
func NewMessageReader(c *tls.Conn) *MessageReader {
	return &MessageReader{c: c, tmp: make([]byte, maxRecord)}
}

// Read returns the next message without its NUL.
func (r *MessageReader) Read() (string, error) {
	for {
		if i := bytes.IndexByte(r.buf, 0); i >= 0 {
			m := string(r.buf[:i])
			r.buf = r.buf[i+1:]
			return m, nil
		}
		if len(r.buf) > maxRecord {
			return "", fmt.Errorf("control: control message longer than %d bytes", maxRecord)
		}
		n, err := r.c.Read(r.tmp)
		if err != nil {
			return "", err
		}
		r.buf = append(r.buf, r.tmp[:n]...)
	}
}

// MessageKind classifies a control message by its first word.
func MessageKind(m string) string {
	if i := strings.IndexAny(m, ", :"); i >= 0 {
		return m[:i]
	}
	return m
}
