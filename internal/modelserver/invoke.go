package modelserver

import (
	"context"
	"net/http"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/wire"
)

// call is one invocation on its way through the queue and a worker. Calls
// are pooled; a call goes back to the pool only when its handler has its
// answer.
type call struct {
	// req.Body aliases the HTTP server's request buffer: it stays valid
	// because invoke does not return while a worker may still read it.
	req wire.Request
	// orig is req.Original's storage when the server sends originals.
	orig     wire.Original
	enqueued time.Time
	// conn is the client's connection when the HTTP server exposes its
	// socket (nil otherwise), to see whether the client is still there.
	conn  syscall.Conn
	timer *time.Timer
	// done receives one value when the outcome fields are set.
	done chan struct{}

	// Outcome, set by whoever sends on done.
	status      int
	contentType string
	headers     []wire.Header
	body        []byte
	err         *Error
	workerID    int
}

func newCall() *call {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t, workerID: -1}
}

// release returns c to the pool. Its request aliased the caller's, so
// nothing of it is kept.
func (s *Server) release(c *call) {
	*c = call{timer: c.timer, done: c.done, workerID: -1}
	s.calls.Put(c)
}

// Invoke runs req through the queue and a worker and fills resp: the
// Invoker the HTTP routes serve. It returns an *Error when the request
// never reached a worker, or the worker or the handler failed without an
// answer of its own. ctx ends the wait while no worker has the request
// (a worker that has it is bounded by the request timeout); Invoke never
// returns while a worker may still read req.
func (s *Server) Invoke(ctx context.Context, req *Request, resp *Response) error {
	c := s.calls.Get().(*call)
	defer s.release(c)
	c.req.Body, c.req.ContentType, c.req.Accept, c.req.Headers = req.Body, req.ContentType, req.Accept, req.Headers
	c.conn = req.Conn
	if s.cfg.OriginalRequest {
		if o := req.Original; o != nil {
			c.orig = *o
		} else {
			c.orig = wire.Original{ContentType: req.ContentType, Accept: req.Accept, Body: req.Body}
		}
		c.req.Original = &c.orig
	}
	if int64(len(req.Body)) > s.cfg.MaxPayload {
		// The HTTP server enforces the limit on clients; this is a
		// pipeline's previous stage answering more than this one takes.
		return errorf(http.StatusRequestEntityTooLarge, TypePayloadTooLarge,
			"the request body of %d bytes exceeds this container's limit of %d bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)",
			len(req.Body), s.cfg.MaxPayload)
	}
	if e := s.invoke(ctx, c); e != nil {
		return e
	}
	// A status the handler set through the context is its answer, body
	// and all (an empty body gets the JSON error instead, with the
	// handler's headers).
	if e := c.err; e != nil && (e.Type != TypeResponseStatus || len(c.body) == 0) {
		resp.Headers = c.headers
		return e
	}
	*resp = Response{Status: c.status, ContentType: c.contentType, Headers: c.headers, Body: c.body, Err: c.err}
	return nil
}

// invoke queues c (its req filled in but for the ID) and waits until it is
// answered. A nil result means a worker answered: the outcome is in c's
// fields, c.err included for handler and worker failures. A non-nil result
// is why c never reached a worker. invoke never returns while a worker may
// still read c.req, so the request may alias buffers the caller reuses
// afterwards.
func (s *Server) invoke(ctx context.Context, c *call) *Error {
	s.pending.Add(1)
	defer s.pending.Add(-1)
	if s.stopping.Load() {
		return errorf(http.StatusServiceUnavailable, TypeUnavailable, "the model server is shutting down")
	}
	if s.loaded.Load() == 0 {
		if h := s.Health(); h.Err != nil {
			return errorf(http.StatusServiceUnavailable, TypeUnavailable, "no worker has the model loaded: %v", h.Err)
		}
	}
	c.req.ID = s.nextID.Add(1)
	c.enqueued = time.Now()
	if err := s.queue.Push(ctx, c); err != nil {
		return queueError(err)
	}
	c.timer.Reset(s.cfg.RequestTimeout)
	timedOut := false
	select {
	case <-c.done:
		c.timer.Stop()
		return nil
	case <-c.timer.C:
		timedOut = true
	case <-ctx.Done():
		c.timer.Stop()
	}
	if s.queue.Remove(c) {
		if !timedOut {
			return errorf(StatusClientClosedRequest, TypeClientGone,
				"the caller gave up before a worker took the request: %v", context.Cause(ctx))
		}
		return errorf(http.StatusServiceUnavailable, TypeUnavailable,
			"no worker took the request within %s (%d of %d workers have the model loaded); retry later",
			s.cfg.RequestTimeout, s.loaded.Load(), len(s.Health().Workers))
	}
	// A worker has it and is bounded by the same timeout.
	<-c.done
	return nil
}
