package main

import (
	"net"
	"sync"
)

// limitListener accepts at most a fixed number of connections at a time.
// While that many are open, Accept waits, so further clients wait in the
// kernel's accept queue instead of each taking a goroutine and buffers;
// the server's read and keep-alive timeouts make sure slots free up.
type limitListener struct {
	net.Listener
	slots     chan struct{} // one element per open connection
	closed    chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close stops accepting; an Accept waiting for a slot returns at once.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection limitConn wraps, as tls.Conn's does, so
// that fault injection can reach the TCP connection to reset it.
func (c *limitConn) NetConn() net.Conn { return c.Conn }
