package client

// Failed transport sends (Session.SocketSendErrors), for operators (the
// service's wirelane_socket_errors_total{op="send"}): the session's
// transport is wrapped once, and a failed send (a batch or a packet) is
// counted once; nothing is added to a send that succeeds. Receive errors
// end the session (it is reported and reconnects), so they are not
// counted here.

import "sync/atomic"

// countedTransport is a transport whose failed sends are counted.
type countedTransport struct {
	transport
	sendErrs atomic.Uint64
}

func (t *countedTransport) send(buf []byte, off, n int) error {
	err := t.transport.send(buf, off, n)
	if err != nil {
		t.sendErrs.Add(1)
	}
	return err
}

func (t *countedTransport) sendBatch(pkts [][]byte) error {
	err := t.transport.sendBatch(pkts)
	if err != nil {
		t.sendErrs.Add(1)
	}
	return err
}

// SocketSendErrors returns how many sends to the server failed in this
// session (a batch or a packet each: no route to the server, a refused
// or broken connection).
func (s *Session) SocketSendErrors() uint64 {
	if t, ok := s.tr.(*countedTransport); ok {
		return t.sendErrs.Load()
	}
	return 0
}
