package uapi

import (
	"bytes"
	"strings"
)

// SetText applies one set operation given as text without its leading
// "set=1" line (as `wg setconf` would send it; the blank line that ends it
// may be left out) to h. Nothing is applied when a line is invalid; the
// error is then an *Error naming the line.
func SetText(h Handler, text string) error {
	if !strings.HasSuffix(text, "\n\n") {
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "\n"
	}
	c, err := ParseSet(strings.NewReader(text))
	if err != nil {
		return err
	}
	return h.Configure(c)
}

// GetText returns h's answer to a get operation without its errno line.
func GetText(h Handler) (string, error) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := h.WriteStatus(w); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return buf.String(), nil
}
