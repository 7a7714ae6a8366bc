package uapi

// A set=1 request flows: bufio.Reader -> lineReader.next (one line as a
// slice of the reader's buffer, no copy for lines that fit in it) ->
// setParser.line (key dispatch and value validation, no allocation except an
// endpoint's address and the growth of the request's slices) -> device.Config.
// Nothing reaches the device until the whole request has been read and
// validated; Serve then hands it to Handler.Configure.
//
// Decisions beyond what the reference implementations spell out:
//   - Keys are accepted in either hexadecimal case (both references do) and
//     always written lowercase.
//   - A line longer than MaxLineLen bytes is an EINVAL error at its line; the
//     rest of the line is read and discarded, so memory stays bounded.
//   - Unknown keys are EINVAL at their line, as in the reference; a line
//     without '=' is EPROTO, as in the reference.
//   - After the first error the parser still reads (and discards) lines up
//     to the blank line, so a connection stays in step and the client gets
//     its errno instead of a reset while it is still writing.
//   - ParseSet treats the end of input at a line boundary as the end of the
//     operation (text handed over in-process need not end with a blank
//     line), but rejects a last line without its newline: it may be a
//     truncated value. Serve, in contrast, applies nothing unless the blank
//     line arrived (see Serve).
//   - An endpoint must be numeric ([v6]:port, with an optional zone, or
//     a.b.c.d:port) with a nonzero port.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
)

// Limits on one set=1 request. They bound the memory a request can take
// (the socket is private to root, but a runaway client must not exhaust the
// daemon).
const (
	// MaxLineLen is the longest line accepted, in bytes without the newline.
	// The longest valid line is well under 128 bytes.
	MaxLineLen = 512
	// MaxPeers is the most public_key lines in one request (the kernel's
	// own limit on peers per device).
	MaxPeers = 1 << 20
	// MaxAllowedIPs is the most allowed_ip lines in one request, all peers
	// together: eight times the 131,071 prefixes the kernel's tests give
	// one peer.
	MaxAllowedIPs = 1 << 20
)

// readerBufferSize is the size of the bufio.Reader ParseSet and Serve create.
const readerBufferSize = 64 << 10

var (
	errLineTooLong = errors.New("line too long")
	errNoNewline   = errors.New("input ends inside a line")
)

// lineReader reads lines from a bufio.Reader without copying the ones that
// fit in its buffer.
type lineReader struct {
	br      *bufio.Reader
	scratch [MaxLineLen + 1]byte // gathers a line longer than br's buffer
}

// next returns the next line without its newline. The slice is valid until
// the following call. Errors: io.EOF at a line boundary, errNoNewline when
// the input ends inside a line, errLineTooLong (the line has been consumed),
// or the reader's own error.
func (lr *lineReader) next() ([]byte, error) {
	b, err := lr.br.ReadSlice('\n')
	switch {
	case err == nil:
		if len(b)-1 > MaxLineLen {
			return nil, errLineTooLong
		}
		return b[:len(b)-1], nil
	case err == io.EOF && len(b) == 0:
		return nil, io.EOF
	case err == io.EOF:
		return nil, errNoNewline
	case err != bufio.ErrBufferFull:
		return nil, err
	}
	// The line is longer than the reader's buffer (possible with a small
	// caller-supplied reader): gather it, or skip it when it is too long.
	n, long := 0, false
	for {
		if !long && n+len(b) <= len(lr.scratch) {
			n += copy(lr.scratch[n:], b)
		} else {
			long = true
		}
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF {
				return nil, errNoNewline
			}
			return nil, err
		}
		b, err = lr.br.ReadSlice('\n')
	}
	if long {
		return nil, errLineTooLong
	}
	return lr.scratch[:n-1], nil
}

// ParseSet reads one set=1 operation (the caller has consumed the set=1
// line) up to and including the blank line that ends it, and returns it
// validated. Errors are *Error values carrying the errno for the wire and
// the 1-based line number (line 1 follows set=1); their messages never
// contain key material. If r is a *bufio.Reader it is read directly and
// nothing past the blank line is consumed; otherwise ParseSet buffers r and
// may read past the blank line.
//
// The end of input at a line boundary also ends the operation; a last line
// without its newline is an error.
func ParseSet(r io.Reader) (*device.Config, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, readerBufferSize)
	}
	lr := &lineReader{br: br}
	req, perr, rerr := parseSet(lr)
	if perr != nil {
		return nil, perr
	}
	if rerr != nil && rerr != io.EOF {
		return nil, &Error{Errno: ErrnoIO, Msg: "reading request: " + rerr.Error()}
	}
	return req, nil
}

// parseSet reads lines up to the blank line. It returns the request or the
// first parse error, and readErr: nil when the blank line was read, io.EOF
// when the input ended at a line boundary before it, or the read failure
// (a parse error then also describes a last line without its newline).
func parseSet(lr *lineReader) (req *device.Config, perr *Error, readErr error) {
	p := setParser{req: new(device.Config)}
	for lineNo := 1; ; lineNo++ {
		line, err := lr.next()
		switch err {
		case nil:
		case errLineTooLong:
			if perr == nil {
				perr = &Error{Errno: ErrnoInvalid, Line: lineNo, Msg: "line longer than " + itoa(MaxLineLen) + " bytes"}
			}
			continue
		case errNoNewline:
			if perr == nil {
				perr = &Error{Errno: ErrnoInvalid, Line: lineNo, Msg: "input ends inside the line (no newline)"}
			}
			return nil, perr, io.ErrUnexpectedEOF
		default:
			if perr != nil {
				return nil, perr, err
			}
			return p.req, nil, err
		}
		if len(line) == 0 {
			if perr != nil {
				return nil, perr, nil
			}
			return p.req, nil, nil
		}
		if perr == nil {
			if msg, errno := p.line(line); errno != 0 {
				perr = &Error{Errno: errno, Line: lineNo, Msg: msg}
				p.req = nil
			}
		}
	}
}

// setParser holds the state of one request while its lines are read.
type setParser struct {
	req     *device.Config
	inPeers bool // a public_key line has been read: peer keys apply to the last peer
	allowed int  // allowed_ip lines so far
}

// line applies one key=value line to the request. It returns a message and
// an Errno when the line is invalid.
func (p *setParser) line(line []byte) (string, Errno) {
	eq := bytes.IndexByte(line, '=')
	if eq < 0 {
		return "line without '='", ErrnoProtocol
	}
	key, val := line[:eq], line[eq+1:]
	if string(key) == "public_key" {
		if len(p.req.Peers) >= MaxPeers {
			return "more than " + itoa(MaxPeers) + " peers in one request", ErrnoInvalid
		}
		var k noise.Key
		if !decodeKeyHex(&k, val) {
			return "public_key: want 64 hexadecimal characters", ErrnoInvalid
		}
		p.req.Peers = append(p.req.Peers, device.PeerConfig{PublicKey: k})
		p.inPeers = true
		return "", 0
	}
	if !p.inPeers {
		return p.deviceLine(key, val)
	}
	return p.peerLine(&p.req.Peers[len(p.req.Peers)-1], key, val)
}

func (p *setParser) deviceLine(key, val []byte) (string, Errno) {
	r := p.req
	switch string(key) {
	case "private_key":
		var k noise.Key
		if !decodeKeyHex(&k, val) {
			return "private_key: want 64 hexadecimal characters", ErrnoInvalid
		}
		r.PrivateKey = &k
	case "listen_port":
		n, ok := parseUint(val, 0xffff)
		if !ok {
			return badValue("listen_port", val, "0-65535"), ErrnoInvalid
		}
		port := uint16(n)
		r.ListenPort = &port
	case "fwmark":
		n, ok := parseUint(val, 0xffffffff)
		if !ok {
			return badValue("fwmark", val, "0-4294967295"), ErrnoInvalid
		}
		mark := uint32(n)
		r.FwMark = &mark
	case "replace_peers":
		if string(val) != "true" {
			return badValue("replace_peers", val, "true"), ErrnoInvalid
		}
		r.ReplacePeers = true
	case "remove", "update_only", "preshared_key", "endpoint",
		"persistent_keepalive_interval", "replace_allowed_ips",
		"allowed_ip", "protocol_version":
		return "peer key " + string(key) + " before any public_key", ErrnoInvalid
	default:
		return "unknown device key " + quoteKey(key), ErrnoInvalid
	}
	return "", 0
}

func (p *setParser) peerLine(peer *device.PeerConfig, key, val []byte) (string, Errno) {
	switch string(key) {
	case "remove":
		if string(val) != "true" {
			return badValue("remove", val, "true"), ErrnoInvalid
		}
		peer.Remove = true
	case "update_only":
		if string(val) != "true" {
			return badValue("update_only", val, "true"), ErrnoInvalid
		}
		peer.UpdateOnly = true
	case "preshared_key":
		var k noise.Key
		if !decodeKeyHex(&k, val) {
			return "preshared_key: want 64 hexadecimal characters", ErrnoInvalid
		}
		peer.PresharedKey = &k
	case "endpoint":
		ap, err := netip.ParseAddrPort(string(val))
		if err != nil {
			return badValue("endpoint", val, "a numeric [v6]:port or a.b.c.d:port"), ErrnoInvalid
		}
		if ap.Port() == 0 {
			return badValue("endpoint", val, "a nonzero port"), ErrnoInvalid
		}
		peer.Endpoint = &ap
	case "persistent_keepalive_interval":
		n, ok := parseUint(val, 0xffff)
		if !ok {
			return badValue("persistent_keepalive_interval", val, "0-65535"), ErrnoInvalid
		}
		secs := uint16(n)
		peer.PersistentKeepalive = &secs
	case "replace_allowed_ips":
		if string(val) != "true" {
			return badValue("replace_allowed_ips", val, "true"), ErrnoInvalid
		}
		peer.ReplaceAllowedIPs = true
		// Replacing drops whatever came before, so earlier lines of this
		// peer need not reach the device (the reference applies the lines
		// in order, with the same result).
		peer.AllowedIPs = nil
	case "allowed_ip":
		if p.allowed >= MaxAllowedIPs {
			return "more than " + itoa(MaxAllowedIPs) + " allowed_ip lines in one request", ErrnoInvalid
		}
		remove := len(val) > 0 && val[0] == '-'
		cidr := val
		if remove {
			cidr = val[1:]
		}
		pfx, ok := parsePrefix(cidr)
		if !ok {
			return badValue("allowed_ip", val, "an address/bits prefix, or -prefix to remove one"), ErrnoInvalid
		}
		p.allowed++
		if len(peer.AllowedIPs) == cap(peer.AllowedIPs) {
			// Double rather than append's gentler growth for big
			// slices: a 131,071-prefix peer then allocates about 2x
			// its final size in total instead of about 5x.
			peer.AllowedIPs = slices.Grow(peer.AllowedIPs, max(8, len(peer.AllowedIPs)))
		}
		peer.AllowedIPs = append(peer.AllowedIPs, device.AllowedIPChange{Prefix: pfx.Masked(), Remove: remove})
	case "protocol_version":
		if string(val) != "1" {
			return badValue("protocol_version", val, "1"), ErrnoInvalid
		}
	case "private_key", "listen_port", "fwmark", "replace_peers":
		return "device key " + string(key) + " after the first public_key", ErrnoInvalid
	default:
		return "unknown peer key " + quoteKey(key), ErrnoInvalid
	}
	return "", 0
}

// parsePrefix parses a CIDR prefix held in a line buffer without copying it.
// netip.ParsePrefix keeps no reference to its input when it succeeds (a
// prefix cannot carry a zone, the only string an address may hold), and its
// error, which would quote the input, is dropped here; so the temporary
// string view of the buffer never outlives this call.
func parsePrefix(b []byte) (netip.Prefix, bool) {
	if len(b) == 0 {
		return netip.Prefix{}, false
	}
	pfx, err := netip.ParsePrefix(unsafe.String(&b[0], len(b)))
	return pfx, err == nil
}

// parseUint parses a decimal number of at most limit: digits only (leading
// zeros allowed, as strconv.ParseUint does in the reference), no sign.
func parseUint(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// badValue describes an invalid value. The value is echoed only when it
// is short and made of characters that addresses and numbers use, so that a
// key pasted in the wrong place (64 hexadecimal or 44 base64 characters)
// never reaches a message.
func badValue(key string, val []byte, want string) string {
	if len(val) <= 50 && allIn(val, "0123456789abcdefABCDEF.:[]/%-") {
		return key + ": invalid value " + strconv.Quote(string(val)) + ", want " + want
	}
	return key + ": invalid value (" + itoa(len(val)) + " bytes), want " + want
}

// quoteKey quotes an unknown key name if it looks like one (lowercase
// letters and underscores, at most 32 bytes), and gives only its length
// otherwise.
func quoteKey(key []byte) string {
	if len(key) <= 32 && allIn(key, "abcdefghijklmnopqrstuvwxyz_") {
		return strconv.Quote(string(key))
	}
	return "(" + itoa(len(key)) + " bytes)"
}

func allIn(b []byte, set string) bool {
	for _, c := range b {
		if strings.IndexByte(set, c) < 0 {
			return false
		}
	}
	return true
}
