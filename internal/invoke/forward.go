package invoke

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// The client to instances is fasthttp's, not net/http's: a round trip to
// a fasthttp echo server on a Unix socket costs about 5 µs against 17 µs
// with net/http's Transport (measured on this project's 2-CPU VM), since
// it runs on the calling goroutine with no read/write loop goroutines to
// hand off to. What net/http does for free and fasthttp does not,
// noticing that an idle pooled connection was closed by the instance,
// checkedConn does.

// maxConnsPerInstance bounds the connections to one instance; far above
// the 64 concurrent invocations an instance is sized for.
const maxConnsPerInstance = 512

// maxResponse bounds an instance's answer held in memory.
const maxResponse = 256 << 20

// dialError is a failure to connect to an instance: nothing of the
// request was sent, so another instance may take it.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return fmt.Sprintf("connect to instance %s: %v", e.addr, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// errStaleConn: a pooled connection turned out closed by the instance
// before anything of the request was written on it.
var errStaleConn = errors.New("pooled connection closed by the instance")

// newClient returns the pooled client to instances. Each instance gets its
// own URL host (its address, hex-encoded), so the pool keys connections by
// instance and the dialer recovers the address from the host.
func newClient(timeout time.Duration) *fasthttp.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &fasthttp.Client{
		Dial: func(hostport string) (net.Conn, error) {
			addr, err := addrOfHost(hostport)
			if err != nil {
				return nil, &dialError{addr: hostport, err: err}
			}
			network, target := "tcp", addr
			if p, ok := strings.CutPrefix(addr, "unix:"); ok {
				network, target = "unix", p
			}
			c, err := d.Dial(network, target)
			if err != nil {
				return nil, &dialError{addr: addr, err: err}
			}
			return newCheckedConn(c), nil
		},
		// A request is sent again only when nothing of it was written:
		// the connection it was to go on was found closed first.
		RetryIfErr: func(_ *fasthttp.Request, _ int, err error) (bool, bool) {
			return false, errors.Is(err, errStaleConn)
		},
		MaxIdemponentCallAttempts: 8,
		MaxConnsPerHost:           maxConnsPerInstance,
		// Below the model server's 5-minute idle timeout: the client
		// closes an idle connection before the instance does.
		MaxIdleConnDuration:      30 * time.Second,
		ReadTimeout:              timeout,
		WriteTimeout:             timeout,
		MaxResponseBodySize:      maxResponse,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true,
	}
}

// checkedConn is a client connection that, before the first write of a
// request on a connection that already carried one and has since been
// idle, checks that the instance has not closed it (a non-blocking peek: EOF or an error means
// closed). The write then fails with errStaleConn without sending a byte,
// and the client retries on another connection.
type checkedConn struct {
	net.Conn
	raw      syscall.RawConn // nil when the connection has no descriptor
	check    bool            // a response was read since the last write
	lastRead time.Time
}

// idleBeforeCheck is how long a connection must have been idle before a
// write checks it: one busy with back-to-back requests is not (that would
// cost a system call per request), and an instance closes an idle
// connection only when it stops or crashes, which a request reusing the
// connection within this time would not have escaped anyway.
const idleBeforeCheck = time.Millisecond

func newCheckedConn(c net.Conn) net.Conn {
	cc := &checkedConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			cc.raw = raw
		}
	}
	return cc
}

func (c *checkedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.check, c.lastRead = true, time.Now()
	return n, err
}

func (c *checkedConn) Write(p []byte) (int, error) {
	if c.check {
		c.check = false
		if time.Since(c.lastRead) >= idleBeforeCheck && c.peerClosed() {
			return 0, errStaleConn
		}
	}
	return c.Conn.Write(p)
}

// peerClosed reports whether the peer closed the connection (or sent
// something unasked, which an idle HTTP connection never carries).
func (c *checkedConn) peerClosed() bool {
	if c.raw == nil {
		return false
	}
	closed := false
	var b [1]byte
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch err {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				// Open, and nothing to read: as it should be.
			default:
				// EOF (0 bytes, no error), a reset, or bytes no
				// request asked for.
				closed = true
			}
			return true
		}
	})
	return closed || err != nil
}

// hostOf is the URL host standing for an instance address.
func hostOf(addr string) string { return "i" + hex.EncodeToString([]byte(addr)) }

// addrOfHost inverts hostOf on the client's "host:port".
func addrOfHost(hostport string) (string, error) {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h, ok := strings.CutPrefix(h, "i")
	if !ok {
		return "", errors.New("not an instance host")
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// isDialError reports whether err says the request never left: the
// connection to the instance could not be made.
func isDialError(err error) bool {
	var de *dialError
	return errors.As(err, &de)
}
