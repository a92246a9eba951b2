package modelserver

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Lingering close: when the HTTP server closes a connection while the
// client is still sending (a body over the payload limit answered with 413
// before it was read), a plain close makes the kernel reset the
// connection, and the reset can destroy the answer before the client reads
// it. A lingering connection instead shuts down its sending side, reads
// and discards what the client still sends for a bounded time and amount,
// and only then closes, as net/http does.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 64 << 20
)

// lingeringListener hands out connections that close gently.
type lingeringListener struct{ net.Listener }

func (l lingeringListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &lingeringConn{TCPConn: tc}, nil
	}
	return c, nil
}

type lingeringConn struct{ *net.TCPConn }

// Close sends FIN at once and closes the socket in the background once the
// client has stopped sending (or after lingerTime).
func (c *lingeringConn) Close() error {
	if err := c.TCPConn.CloseWrite(); err != nil {
		return c.TCPConn.Close()
	}
	go func() {
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c.TCPConn, lingerBytes)
		c.TCPConn.Close()
	}()
	return nil
}

// clientGone reports whether the client at the other end of c has closed
// the connection (or reset it), without consuming anything it sent: a
// non-blocking peek reads end-of-file. Like net/http's check, this also
// takes a client that only shut down its sending side for gone.
func clientGone(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
	})
	return gone
}
