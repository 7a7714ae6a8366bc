package uapi

// One connection flows: conn -> bufio.Reader -> operation line ->
//   get=1: blank line -> Handler.WriteStatus streams into a Writer -> errno=N, blank
//   set=1: parseSet (whole request validated) -> Handler.Configure -> errno=N, blank
// and loops until the client closes its end. Replies go through one
// bufio.Writer, flushed after every answer. Operations on one connection run
// one after another; separate connections run concurrently.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/wirelane/wirelane/device"
)

// Serve answers the operations that arrive on conn, one after another, until
// the client closes the connection; then it closes conn and returns nil.
//
//   - get=1 followed by a blank line: Handler.WriteStatus's answer, then
//     errno=N.
//     Anything but a blank line after get=1 is answered errno=-22 once the
//     blank line arrives.
//   - set=1, lines, blank line: the whole request is read and validated
//     first; a valid one goes to Handler.Configure. Either way the answer is
//     errno=0 or errno=-N, and the connection stays usable.
//   - any other line (including a stray blank line): errno=-71 is written
//     and Serve closes the connection, since it can no longer tell where
//     operations start; it returns an *Error with ErrnoProtocol.
//
// If the connection ends inside an operation (before its blank line),
// nothing is applied, nothing is answered, and Serve returns an error
// wrapping io.ErrUnexpectedEOF. Read and write failures are returned as
// they are. Serve sets no deadlines; the caller may set them on conn.
//
// Errors are answered errno=-N, byte for byte as the reference does. wg
// reads a set answer with a signed number and reports the errno's text; its
// get parser takes only unsigned numbers, so a failed get shows in wg as a
// protocol error whatever N is (as with the reference).
func Serve(conn net.Conn, h Handler) error {
	defer conn.Close()
	return serve(conn, h)
}

func serve(rw io.ReadWriter, h Handler) error {
	lr := &lineReader{br: bufio.NewReaderSize(rw, readerBufferSize)}
	bw := bufio.NewWriterSize(rw, writerBufferSize)
	var scratch [32]byte
	answer := func(opErr error) error {
		if _, err := bw.Write(appendErrno(scratch[:0], opErr)); err != nil {
			return err
		}
		return bw.Flush()
	}
	for {
		op, err := lr.next()
		switch err {
		case nil:
		case io.EOF:
			return nil
		case errLineTooLong, errNoNewline:
			op = nil // an unknown operation; answered below
		default:
			return err
		}
		switch string(op) {
		case "get=1":
			counters, perr, err := getTrailer(lr)
			if err != nil {
				return err
			}
			if perr != nil {
				if err := answer(perr); err != nil {
					return err
				}
				continue
			}
			w := NewWriter(bw)
			var sw device.StatusWriter = w
			if counters {
				sw = counterWriter{w}
			}
			if err := w.Finish(h.WriteStatus(sw)); err != nil {
				return err
			}
		case "set=1":
			req, perr, rerr := parseSet(lr)
			if rerr != nil {
				if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
					return fmt.Errorf("uapi: set=1 not ended by a blank line, nothing applied: %w", io.ErrUnexpectedEOF)
				}
				return rerr
			}
			var opErr error
			if perr != nil {
				opErr = perr
			} else {
				opErr = h.Configure(req)
			}
			if err := answer(opErr); err != nil {
				return err
			}
		default:
			perr := &Error{Errno: ErrnoProtocol, Msg: "unknown operation"}
			if err := answer(perr); err != nil {
				return errors.Join(perr, err)
			}
			return perr
		}
	}
}

// getTrailer reads what follows get=1: a blank line, or CountersRequest
// and a blank line (counters is then true). It returns a parse error if it
// was anything else (after reading up to the blank line), or the read
// error when the connection ended first.
func getTrailer(lr *lineReader) (counters bool, perr *Error, err error) {
	for lineNo := 1; ; lineNo++ {
		line, err := lr.next()
		switch err {
		case nil:
		case errLineTooLong:
			line = notBlank
		case io.EOF, errNoNewline:
			return false, nil, fmt.Errorf("uapi: get=1 not ended by a blank line: %w", io.ErrUnexpectedEOF)
		default:
			return false, nil, err
		}
		if len(line) == 0 {
			return counters && perr == nil, perr, nil
		}
		if lineNo == 1 && string(line) == CountersRequest {
			counters = true
			continue
		}
		if perr == nil {
			perr = &Error{Errno: ErrnoInvalid, Line: lineNo, Msg: "get=1 takes no arguments but " + CountersRequest}
		}
	}
}

// notBlank stands for a line that was too long to keep.
var notBlank = []byte("-")
