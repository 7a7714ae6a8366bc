package uapi

import (
	"bufio"
	"errors"
	"net/netip"
)

// Writer streams a get=1 answer. (Implementation in progress.)
type Writer struct {
	bw  *bufio.Writer
	err error
}

var errTODO = errors.New("uapi: writer not implemented yet")

// Device writes the device keys.
func (w *Writer) Device(d DeviceInfo) error { return errTODO }

// Peer starts a peer.
func (w *Writer) Peer(p PeerInfo) error { return errTODO }

// AllowedIP writes one allowed_ip line for the current peer.
func (w *Writer) AllowedIP(p netip.Prefix) error { return errTODO }
