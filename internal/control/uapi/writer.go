package uapi

// A get=1 answer flows: Handler.WriteStatus -> Writer.Device / Peer /
// AllowedIP (the device.StatusWriter methods) -> one line at a time
// formatted into a fixed scratch array -> bufio.Writer -> the connection.
// Nothing holds the whole answer: memory stays constant whatever the number
// of peers and allowed IPs, and a line costs no allocation. Finish ends the
// answer with errno=N and a blank line.

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"strconv"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
)

// writerBufferSize is the size of the bufio.Writer NewWriter creates: large
// enough that a peer's fixed lines and a few hundred allowed IPs go out in
// one write.
const writerBufferSize = 16 << 10

var _ device.StatusWriter = (*Writer)(nil)

// Writer streams a get=1 answer in the order `wg` expects: the device keys,
// then each peer's keys followed by its allowed IPs. It remembers the first
// error (from the underlying writer or from a call out of order) and returns
// it from every later call, so a Handler can stop at the first failure.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	bw      *bufio.Writer
	err     error // first error (write failure or misuse); sticky
	werr    error // first write failure: the connection is broken
	state   writerState
	scratch [128]byte // one line is formatted here before it is buffered
}

type writerState uint8

const (
	stateStart  writerState = iota // nothing written yet
	stateDevice                    // device keys written, no peer yet
	statePeer                      // inside a peer: allowed IPs may follow
	stateDone                      // Finish was called
)

// errOrder reports a Handler that calls the Writer out of order or with an
// invalid prefix; the client sees it as an I/O error of the device.
var errOrder = &Error{Errno: ErrnoIO, Msg: "device state written out of order"}

// NewWriter returns a Writer that buffers its lines into w. If w is already
// a *bufio.Writer it is used as is; otherwise a 16 KiB one is created.
func NewWriter(w io.Writer) *Writer {
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriterSize(w, writerBufferSize)
	}
	return &Writer{bw: bw}
}

// Err returns the first error the Writer met, or nil.
func (w *Writer) Err() error { return w.err }

// Device writes the device keys: private_key (omitted when zero),
// listen_port (omitted when 0, as the reference does; `wg` reads a missing
// port as 0) and fwmark (omitted when 0). It must be the first call, at
// most once; a Handler with no device keys to report may skip it.
func (w *Writer) Device(d device.Status) error {
	if w.err != nil {
		return w.err
	}
	if w.state != stateStart {
		return w.fail(errOrder)
	}
	w.state = stateDevice
	if !d.PrivateKey.IsZero() {
		w.keyLine("private_key=", &d.PrivateKey)
	}
	if d.ListenPort != 0 {
		w.uintLine("listen_port=", uint64(d.ListenPort))
	}
	if d.FwMark != 0 {
		w.uintLine("fwmark=", uint64(d.FwMark))
	}
	return w.err
}

// CounterPrefix starts the keys of the device's own counters in the answer
// to a get=1 that asks for them (CountersRequest): wirelane_NAME=N, the
// names device.Counters.Each gives. They follow the device keys, before
// the first peer. A plain get=1 answer has none (it stays byte for byte
// the reference's); wg(8) and wgctrl-go ignore keys they do not know, so
// they would read either.
const CounterPrefix = "wirelane_"

// CountersRequest is the line that, between get=1 and its blank line,
// asks for the counters: "get=1\nwirelane_counters=1\n\n". A daemon that
// does not know it (wireguard-go) answers errno=-22.
const CountersRequest = "wirelane_counters=1"

// counterWriter is a Writer that takes the counters (device.CounterWriter),
// for a get=1 that asked for them.
type counterWriter struct{ *Writer }

func (w counterWriter) Counters(c device.Counters) error { return w.WriteCounters(c) }

// WriteCounters writes the device's counters as CounterPrefix keys. It must
// follow Device, before any Peer.
func (w *Writer) WriteCounters(c device.Counters) error {
	if w.err != nil {
		return w.err
	}
	if w.state != stateDevice {
		return w.fail(errOrder)
	}
	c.Each(func(key string, v uint64) {
		b := append(w.scratch[:0], CounterPrefix...)
		b = append(b, key...)
		b = append(b, '=')
		b = strconv.AppendUint(b, v, 10)
		w.line(append(b, '\n'))
	})
	return w.err
}

// Peer starts a peer: public_key, preshared_key (always, all zeros when
// none, as the reference does), protocol_version=1, endpoint (omitted when
// invalid; IPv6 as [addr]:port), last_handshake_time_sec and _nsec (0 and 0
// for never), tx_bytes, rx_bytes and persistent_keepalive_interval. Its
// allowed IPs follow through AllowedIP.
func (w *Writer) Peer(p device.PeerStatus) error {
	if w.err != nil {
		return w.err
	}
	if w.state == stateDone {
		return w.fail(errOrder)
	}
	w.state = statePeer
	w.keyLine("public_key=", &p.PublicKey)
	w.keyLine("preshared_key=", &p.PresharedKey)
	w.line(append(w.scratch[:0], "protocol_version=1\n"...))
	if p.Endpoint.IsValid() {
		b := append(w.scratch[:0], "endpoint="...)
		w.line(append(p.Endpoint.AppendTo(b), '\n'))
	}
	var sec, nsec uint64
	if !p.LastHandshake.IsZero() {
		if s := p.LastHandshake.Unix(); s > 0 {
			// wg takes only unsigned numbers; a time before 1970
			// cannot be a real handshake, so it reads as never.
			sec, nsec = uint64(s), uint64(p.LastHandshake.Nanosecond())
		}
	}
	w.uintLine("last_handshake_time_sec=", sec)
	w.uintLine("last_handshake_time_nsec=", nsec)
	w.uintLine("tx_bytes=", p.TxBytes)
	w.uintLine("rx_bytes=", p.RxBytes)
	w.uintLine("persistent_keepalive_interval=", uint64(p.PersistentKeepalive))
	return w.err
}

// AllowedIP writes one allowed_ip line for the current peer. An invalid
// prefix is an error (the Handler's bug), reported without writing.
func (w *Writer) AllowedIP(p netip.Prefix) error {
	if w.err != nil {
		return w.err
	}
	if w.state != statePeer || !p.IsValid() {
		return w.fail(errOrder)
	}
	b := append(w.scratch[:0], "allowed_ip="...)
	w.line(append(p.AppendTo(b), '\n'))
	return w.err
}

// Flush writes any buffered lines to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.werr = err
		w.err = err
	}
	return w.err
}

// Finish ends the answer with errno=0 when opErr is nil, or errno=-N for
// the Errno that opErr carries (see ErrnoOf), then a blank line, and
// flushes. If the Writer was misused, the answer ends with errno=-5 even
// when opErr is nil. Finish returns the write error, if any; opErr is the
// caller's to report. After a write failure Finish writes nothing and
// returns that failure: the connection is broken. Finish may be called once.
func (w *Writer) Finish(opErr error) error {
	if w.state == stateDone {
		return w.fail(errOrder)
	}
	w.state = stateDone
	if w.werr != nil {
		return w.werr
	}
	if opErr == nil {
		opErr = w.err
	}
	w.err = nil
	w.line(appendErrno(w.scratch[:0], opErr))
	return w.Flush()
}

// appendErrno appends "errno=N\n\n" for err (0 when nil).
func appendErrno(dst []byte, err error) []byte {
	dst = append(dst, "errno="...)
	if err != nil {
		dst = append(dst, '-')
		dst = strconv.AppendInt(dst, int64(ErrnoOf(err)), 10)
	} else {
		dst = append(dst, '0')
	}
	return append(dst, '\n', '\n')
}

// ErrnoOf returns the Errno an error is answered with: the one an *Error
// carries (found with errors.As), ErrnoAddrUse for a *device.BindError (a
// port or mark the bind refused), ErrnoIO for device.ErrClosed, ErrnoOther
// for anything else, 0 for nil.
func ErrnoOf(err error) Errno {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) && e.Errno > 0 {
		return e.Errno
	}
	var be *device.BindError
	if errors.As(err, &be) {
		return ErrnoAddrUse
	}
	if errors.Is(err, device.ErrClosed) {
		return ErrnoIO
	}
	return ErrnoOther
}

func (w *Writer) keyLine(prefix string, k *noise.Key) {
	b := append(w.scratch[:0], prefix...)
	b = appendKeyHex(b, k)
	w.line(append(b, '\n'))
	clear(w.scratch[:]) // the scratch may have held a private key
}

func (w *Writer) uintLine(prefix string, v uint64) {
	b := append(w.scratch[:0], prefix...)
	b = strconv.AppendUint(b, v, 10)
	w.line(append(b, '\n'))
}

func (w *Writer) line(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.werr = err
		w.err = err
	}
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}
