// Package bodytimeout bounds how long a request body may go without
// progress. net/http offers only a whole-request ReadTimeout, which would cut
// a legitimate multi-gigabyte upload over a slow link; here each read of the
// body gets the connection's read deadline pushed to now+idle, so a client
// that keeps sending, however slowly, is never cut, and one that stalls is
// disconnected idle later (its handler sees a read error and frees what it
// held: the socket, the goroutine, an S3 temporary file).
package bodytimeout

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// ErrStalled is wrapped by the error a body read returns when the client
// sent nothing for the idle timeout.
var ErrStalled = errors.New("request body stalled")

// Handler returns next with every request body under an idle timeout. A
// zero or negative idle returns next unchanged. Only requests with a body
// are touched, and the deadline is lifted once the body is consumed, so a
// long-running response is not affected.
func Handler(next http.Handler, idle time.Duration) http.Handler {
	if idle <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		b := &body{src: r.Body, rc: http.NewResponseController(w), idle: idle}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// body is a request body whose reads keep the read deadline ahead.
type body struct {
	src  io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	// set is when the deadline was last pushed; it is pushed again when a
	// quarter of idle has passed, so a read always has at least 3/4 idle.
	set  time.Time
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	if !b.done {
		if now := time.Now(); now.Sub(b.set) > b.idle/4 {
			// An error means the writer cannot set deadlines (a test
			// recorder, say); the body then simply has no timeout.
			if b.rc.SetReadDeadline(now.Add(b.idle)) == nil {
				b.set = now
			}
		}
	}
	n, err := b.src.Read(p)
	switch {
	case err == io.EOF:
		// The body is consumed, and net/http has lifted the deadline for
		// its background read (which notices a client going away). A
		// deadline set now would cut that read and cancel the request's
		// context, so no later read sets one.
		b.done = true
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: no bytes for %s: %w", ErrStalled, b.idle, err)
	}
	return n, err
}

func (b *body) Close() error { return b.src.Close() }
