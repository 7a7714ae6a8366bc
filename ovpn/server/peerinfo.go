package server

// The client's peer-info lines (sent in its key_method_2): the IV_PROTO
// feature bits, the IV_CIPHERS it offers, IV_NCP and its version.

import (
	"strconv"
	"strings"
)

// IV_PROTO bits the server reads.
const (
	ivProtoDataV2    = 1 << 1
	ivProtoTLSExport = 1 << 3
	ivProtoCCExit    = 1 << 7
)

// peerInfo holds the client's peer-info lines.
type peerInfo struct {
	proto   int
	ciphers []string
	ncp     int
	version string
}

func parsePeerInfo(s string) peerInfo {
	var pi peerInfo
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "IV_PROTO":
			pi.proto, _ = strconv.Atoi(v)
		case "IV_CIPHERS":
			pi.ciphers = strings.Split(v, ":")
		case "IV_NCP":
			pi.ncp, _ = strconv.Atoi(v)
		case "IV_VER":
			pi.version = v
		}
	}
	return pi
}
