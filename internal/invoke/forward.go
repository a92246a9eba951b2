package invoke

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// maxIdlePerInstance is how many idle keep-alive connections the client
// keeps to one instance: enough for 64 concurrent invocations without a
// new dial each.
const maxIdlePerInstance = 128

// dialError is a failure to connect to an instance: nothing of the
// request was sent, so another instance may take it.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return fmt.Sprintf("connect to instance %s: %v", e.addr, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// newTransport returns the pooled client transport to instances. Each
// instance gets its own URL host (its address, hex-encoded), so the pool
// keys connections by instance and the dialer recovers the address from
// the host without a table.
func newTransport(timeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, hostport string) (net.Conn, error) {
			addr, err := addrOfHost(hostport)
			if err != nil {
				return nil, &dialError{addr: hostport, err: err}
			}
			network, target := "tcp", addr
			if p, ok := strings.CutPrefix(addr, "unix:"); ok {
				network, target = "unix", p
			}
			c, err := d.DialContext(ctx, network, target)
			if err != nil {
				return nil, &dialError{addr: addr, err: err}
			}
			return c, nil
		},
		MaxIdleConns:        0, // no limit across instances
		MaxIdleConnsPerHost: maxIdlePerInstance,
		IdleConnTimeout:     90 * time.Second,
		// The model server closes idle connections after 5 minutes;
		// ours go first, so a reused one is rarely already closed (and
		// the transport retries a request on a closed idle connection
		// only when nothing of it was written).
		ResponseHeaderTimeout: timeout,
		DisableCompression:    true, // bodies go through untouched
		ForceAttemptHTTP2:     false,
	}
}

// hostOf is the URL host standing for an instance address.
func hostOf(addr string) string { return "i" + hex.EncodeToString([]byte(addr)) }

// addrOfHost inverts hostOf on the transport's "host:port".
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
