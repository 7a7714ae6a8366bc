package service

import (
	"net"
	"sync"
)

// limitedListener bounds the connections open at once (Accept waits for a
// slot) and records each connection's caller when it is accepted, while
// the connection is still the listener's own type.
type limitedListener struct {
	net.Listener
	sem       chan struct{} // one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	callerOf  func(net.Conn) caller
}

func newLimitedListener(l net.Listener, n int, callerOf func(net.Conn) caller) *limitedListener {
	return &limitedListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), callerOf: callerOf}
}

// Accept waits for a free slot, then for a connection.
func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, caller: l.callerOf(c), release: func() { <-l.sem }}, nil
}

// Close stops accepting.
func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn is an accepted connection with its caller; closing it frees
// its slot once.
type limitedConn struct {
	net.Conn
	caller  caller // immutable
	once    sync.Once
	release func()
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
