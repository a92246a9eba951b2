package modelserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sagebox/sagebox/internal/wire"
)

// The routes. Only /ping and /invocations belong to SageMaker's container
// contract; /models/model/invoke is TorchServe's (and MME's) spelling of
// /invocations for the single model, and /_sagebox/ holds sagebox's extras.
const (
	pathPing        = "/ping"
	pathInvocations = "/invocations"
	pathModelPrefix = "/models/"
	pathMetrics     = "/_sagebox/metrics"
	pathHealth      = "/_sagebox/health"
	modelName       = "model"
)

// Handler returns the HTTP handler for the inference routes.
func (s *Server) Handler() http.Handler { return s }

// MetricsHandler returns the Prometheus handler for the server's metrics,
// for a listener of its own.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; p {
	case pathInvocations:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return
		}
		s.handleInvocations(w, r)
	case pathPing:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.handlePing(w, r)
	case pathMetrics:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.metrics.handler().ServeHTTP(w, r)
	case pathHealth:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		s.handleHealth(w, r)
	default:
		if rest, ok := strings.CutPrefix(p, pathModelPrefix); ok {
			if name, ok := strings.CutSuffix(rest, "/invoke"); ok && !strings.Contains(name, "/") {
				if name != modelName {
					writeError(w, errorf(http.StatusNotFound, TypeNotFound,
						"model %q is not served here; this server serves one model, named %q", name, modelName), false)
					return
				}
				if r.Method != http.MethodPost {
					methodNotAllowed(w, r, "POST")
					return
				}
				s.handleInvocations(w, r)
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, TypeNotFound,
			"no route for %s %s; the model server answers GET /ping and POST /invocations", r.Method, p), false)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, errorf(http.StatusMethodNotAllowed, TypeMethodNotAllowed,
		"%s is not allowed on %s; use %s", r.Method, r.URL.Path, allow), false)
}

type pingBody struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// handlePing answers 200 {"status": "Healthy"} once every worker has
// loaded the model; 503 while loading, 500 when loading failed.
func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) {
	h := s.Health()
	code := http.StatusOK
	body := pingBody{Status: "Healthy"}
	if !h.Ready {
		code = http.StatusServiceUnavailable
		if h.Err != nil {
			code = http.StatusInternalServerError
		}
		body = pingBody{Status: "Unhealthy", Message: h.Message}
	}
	writeJSON(w, code, body)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Health())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// call is one invocation on its way through the queue and a worker. Calls
// are pooled; a call goes back to the pool only when its handler has its
// answer.
type call struct {
	req      wire.Request
	enqueued time.Time
	timer    *time.Timer
	// done receives one value when the outcome fields are set.
	done chan struct{}

	// Outcome, set by whoever sends on done.
	status      int
	contentType string
	headers     []wire.Header
	body        []byte
	err         *Error
	workerID    int

	bodyBuf *[]byte // pooled request body buffer, if any
}

func newCall() *call {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t, workerID: -1}
}

// release returns c and its body buffer to the pools.
func (s *Server) release(c *call) {
	if c.bodyBuf != nil {
		s.bodies.Put(c.bodyBuf)
	}
	hs := c.req.Headers
	clear(hs)
	*c = call{req: wire.Request{Headers: hs[:0]}, timer: c.timer, done: c.done, workerID: -1}
	s.calls.Put(c)
}

// pooledBody is the largest request body read into a pooled buffer.
const pooledBody = 64 << 10

// readBody reads the request body, refusing more than the payload limit.
func (s *Server) readBody(r *http.Request, c *call) *Error {
	limit := s.cfg.MaxPayload
	if r.ContentLength > limit {
		return s.tooLarge(r.ContentLength)
	}
	var buf []byte
	if r.ContentLength >= 0 && r.ContentLength <= pooledBody || r.ContentLength < 0 {
		bp, _ := s.bodies.Get().(*[]byte)
		if bp == nil {
			b := make([]byte, 0, pooledBody)
			bp = &b
		}
		c.bodyBuf = bp
		buf = (*bp)[:0]
	} else {
		buf = make([]byte, 0, r.ContentLength)
	}
	if r.ContentLength >= 0 {
		buf = buf[:r.ContentLength]
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return errorf(http.StatusBadRequest, TypeBadRequest, "read request body: %v", err)
		}
		c.req.Body = buf
		return nil
	}
	// Unknown length (chunked): read at most limit+1 bytes.
	lr := io.LimitReader(r.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return s.tooLarge(-1)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errorf(http.StatusBadRequest, TypeBadRequest, "read request body: %v", err)
		}
	}
	if c.bodyBuf != nil && cap(buf) > pooledBody {
		// Grown beyond the pooled buffer: keep the pooled one for reuse.
		s.bodies.Put(c.bodyBuf)
		c.bodyBuf = nil
	}
	c.req.Body = buf
	return nil
}

func (s *Server) tooLarge(n int64) *Error {
	size := "the request body"
	if n >= 0 {
		size = "the request body of " + strconv.FormatInt(n, 10) + " bytes"
	}
	return errorf(http.StatusRequestEntityTooLarge, TypePayloadTooLarge,
		"%s exceeds the limit of %d bytes (raise it with SAGEMAKER_MAX_PAYLOAD_IN_MB or TS_MAX_REQUEST_SIZE)",
		size, s.cfg.MaxPayload)
}

// handleInvocations queues one request, waits for a worker's answer and
// writes it.
func (s *Server) handleInvocations(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.pending.Add(1)
	defer s.pending.Add(-1)

	if s.stopping.Load() {
		s.fail(w, r, start, errorf(http.StatusServiceUnavailable, TypeUnavailable, "the model server is shutting down"))
		return
	}
	if s.loaded.Load() == 0 {
		if h := s.Health(); h.Err != nil {
			s.fail(w, r, start, errorf(http.StatusServiceUnavailable, TypeUnavailable,
				"no worker has the model loaded: %v", h.Err))
			return
		}
	}
	c := s.calls.Get().(*call)
	if e := s.readBody(r, c); e != nil {
		s.release(c)
		s.fail(w, r, start, e)
		return
	}
	c.req.ID = s.nextID.Add(1)
	hdr := r.Header
	if v := hdr["Content-Type"]; len(v) > 0 {
		c.req.ContentType = v[0]
	}
	if v := hdr["Accept"]; len(v) > 0 {
		c.req.Accept = v[0]
	}
	for name, vs := range hdr {
		for _, v := range vs {
			c.req.Headers = append(c.req.Headers, wire.Header{Name: name, Value: v})
		}
	}
	c.enqueued = time.Now()
	ctx := r.Context()
	if err := s.queue.Push(ctx, c); err != nil {
		s.release(c)
		s.fail(w, r, start, queueError(err))
		return
	}

	c.timer.Reset(s.cfg.RequestTimeout)
	select {
	case <-c.done:
	case <-ctx.Done():
		c.timer.Stop()
		if s.queue.Remove(c) {
			s.release(c)
		}
		// Otherwise a worker holds c and answers into its buffered
		// channel; c is left to the garbage collector.
		return
	case <-c.timer.C:
		if s.queue.Remove(c) {
			s.release(c)
			s.fail(w, r, start, errorf(http.StatusServiceUnavailable, TypeUnavailable,
				"no worker took the request within %s (%d of %d workers have the model loaded); retry later",
				s.cfg.RequestTimeout, s.loaded.Load(), len(s.Health().Workers)))
			return
		}
		// A worker has it and is bounded by the same timeout.
		select {
		case <-c.done:
		case <-ctx.Done():
			return
		}
	}
	c.timer.Stop()

	if c.err != nil {
		s.fail(w, r, start, c.err)
		s.release(c)
		return
	}
	h := w.Header()
	for _, kv := range c.headers {
		if allowedResponseHeader(kv.Name) {
			h.Add(kv.Name, kv.Value)
		}
	}
	if c.contentType != "" {
		h["Content-Type"] = []string{c.contentType}
	} else {
		h["Content-Type"] = nil // no sniffing
	}
	h["Content-Length"] = []string{strconv.Itoa(len(c.body))}
	w.WriteHeader(c.status)
	w.Write(c.body)
	s.metrics.observeRequest(c.status, time.Since(start))
	s.release(c)
}

// fail writes e, logs it and counts it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, start time.Time, e *Error) {
	if e.Type == "" {
		e.Type = strings.ReplaceAll(http.StatusText(e.Code), " ", "")
	}
	level := slogLevelFor(e.Code)
	attrs := []any{"code", e.Code, "type", e.Type, "path", r.URL.Path}
	if e.Traceback != "" {
		attrs = append(attrs, "traceback", e.Traceback)
	}
	s.logger.Log(r.Context(), level, e.Message, attrs...)
	writeError(w, e, s.cfg.IncludeTraceback)
	s.metrics.observeRequest(e.Code, time.Since(start))
}

// allowedResponseHeader reports whether a worker may set a response header:
// the ones that frame the HTTP response stay the server's.
func allowedResponseHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Trailer":
		return false
	}
	return true
}
