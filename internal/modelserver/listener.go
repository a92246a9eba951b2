package modelserver

import (
	"io"
	"net"
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
