package wire

// OpenVPN over TCP: every packet is preceded by its length, 16 bits
// big-endian. Both the client and the server read and write through the
// two types here.
//
//	stream = len(2) | packet | len(2) | packet | ...
//	TCPWriter: prefix written into the headroom before the packet -> one
//	           write (or one writev for a batch), under a mutex
//	TCPReader: buffered reads -> prefix -> packet into one reused buffer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// MaxTCPPacket is the largest packet the 16-bit TCP framing can carry.
const MaxTCPPacket = 0xFFFF

// TCPPrefixLen is the size of the length prefix. TCPWriter writes it into
// the bytes just before each packet, so senders keep that much headroom.
const TCPPrefixLen = 2

// TCPWriter writes framed packets to a stream. It is safe for concurrent
// use: a mutex keeps one frame (or one batch) from interleaving with
// another. It never copies a packet.
type TCPWriter struct {
	mu   sync.Mutex    // held for each write to w; guards bufs
	bufs net.Buffers   // WriteBatch's vector, kept here so that it does not escape per call
	w    io.Writer     // immutable
	bw   BuffersWriter // w's vectored write, nil when it has none; immutable
}

// BuffersWriter is a writer with its own vectored write (writev), like
// the streams of ovpn/internal/rawstream: it writes all of bufs and may
// modify bufs.
type BuffersWriter interface {
	WriteBuffers(bufs [][]byte) (int64, error)
}

// NewTCPWriter returns a TCPWriter on w (usually a net.Conn). When w is
// also a BuffersWriter, WriteBatch uses its WriteBuffers.
func NewTCPWriter(w io.Writer) *TCPWriter {
	bw, _ := w.(BuffersWriter)
	return &TCPWriter{w: w, bw: bw}
}

// Write sends buf[off:off+n] as one frame, writing its prefix into
// buf[off-TCPPrefixLen:off]. It rejects an empty packet, one longer than
// MaxTCPPacket and a buffer without the headroom (ErrBadLength).
func (t *TCPWriter) Write(buf []byte, off, n int) error {
	if off < TCPPrefixLen || n < 0 || off+n > len(buf) {
		return fmt.Errorf("%w: packet at %d+%d in a buffer of %d (want %d bytes of headroom)", ErrBadLength, off, n, len(buf), TCPPrefixLen)
	}
	if err := checkTCPLength(n); err != nil {
		return err
	}
	binary.BigEndian.PutUint16(buf[off-TCPPrefixLen:], uint16(n))
	t.mu.Lock()
	_, err := t.w.Write(buf[off-TCPPrefixLen : off+n])
	t.mu.Unlock()
	return err
}

// WriteBatch sends each pkts[i][TCPPrefixLen:] as a frame, the prefix
// written into pkts[i][:TCPPrefixLen], with one vectored write (w's
// WriteBuffers, or writev on a *net.TCPConn). It checks every length
// before writing any. pkts is consumed: its elements are resliced as they
// are written.
func (t *TCPWriter) WriteBatch(pkts [][]byte) error {
	for _, p := range pkts {
		if len(p) < TCPPrefixLen {
			return fmt.Errorf("%w: batch element of %d bytes has no room for the prefix", ErrBadLength, len(p))
		}
		if err := checkTCPLength(len(p) - TCPPrefixLen); err != nil {
			return err
		}
		binary.BigEndian.PutUint16(p, uint16(len(p)-TCPPrefixLen))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bw != nil {
		_, err := t.bw.WriteBuffers(pkts)
		return err
	}
	t.bufs = pkts
	_, err := t.bufs.WriteTo(t.w)
	t.bufs = nil
	return err
}

func checkTCPLength(n int) error {
	if n == 0 {
		return fmt.Errorf("%w: empty packet", ErrBadLength)
	}
	if n > MaxTCPPacket {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrBadLength, n, MaxTCPPacket)
	}
	return nil
}

// TCPReader reads framed packets from a stream through a buffer, so that
// one read system call can bring in many frames. One goroutine uses it.
type TCPReader struct {
	r   *bufio.Reader
	hdr [TCPPrefixLen]byte // the prefix being read (a local would escape per call)
	buf []byte             // max bytes for the packet, then tailroom
	max int
}

// NewTCPReader returns a reader of frames from r with a read buffer of
// size bytes. It accepts packets of up to max bytes (at most
// MaxTCPPacket); each packet Next returns has tailroom bytes of spare
// capacity after it (decryption in place may use them).
func NewTCPReader(r io.Reader, size, max, tailroom int) *TCPReader {
	max = min(max, MaxTCPPacket)
	return &TCPReader{r: bufio.NewReaderSize(r, size), buf: make([]byte, max+tailroom), max: max}
}

// Next returns the next packet, valid until the following call. A zero
// length and one above the reader's maximum are ErrBadLength (OpenVPN
// never sends either); a stream that ends between frames gives io.EOF,
// inside one io.ErrUnexpectedEOF.
func (t *TCPReader) Next() ([]byte, error) {
	if _, err := io.ReadFull(t.r, t.hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(t.hdr[:]))
	if n == 0 {
		return nil, fmt.Errorf("%w: zero-length frame", ErrBadLength)
	}
	if n > t.max {
		return nil, fmt.Errorf("%w: frame of %d bytes (at most %d)", ErrBadLength, n, t.max)
	}
	if _, err := io.ReadFull(t.r, t.buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return t.buf[:n:len(t.buf)], nil
}

// Ready reports whether a whole frame (or a prefix Next rejects) is
// already buffered, so that Next returns without reading from the stream. A caller that batches work
// flushes it when Ready is false, before Next may wait.
func (t *TCPReader) Ready() bool {
	if t.r.Buffered() < TCPPrefixLen {
		return false
	}
	hdr, _ := t.r.Peek(TCPPrefixLen) // buffered: no read
	return t.r.Buffered() >= TCPPrefixLen+int(binary.BigEndian.Uint16(hdr))
}
