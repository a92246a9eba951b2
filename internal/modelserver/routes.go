package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/wire"
	"github.com/valyala/fasthttp"
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

// HTTP server limits.
const (
	// readBufferSize bounds the request line and headers of one request.
	readBufferSize = 32 << 10
	// readTimeout bounds reading one request, body included.
	readTimeout = 60 * time.Second
	// idleTimeout closes keep-alive connections idle for this long.
	idleTimeout = 5 * time.Minute
)

// HTTPServer serves the inference routes of a Server.
type HTTPServer struct{ fs *fasthttp.Server }

// Serve accepts connections on ln until Shutdown.
func (h *HTTPServer) Serve(ln net.Listener) error { return h.fs.Serve(lingeringListener{ln}) }

// Shutdown stops accepting connections and waits until the open ones have
// answered their current request and closed, or ctx ends.
func (h *HTTPServer) Shutdown(ctx context.Context) error { return h.fs.ShutdownWithContext(ctx) }

// HTTPServer returns the HTTP server for the inference routes. Serve it on
// a listener, and shut it down alongside the Server.
//
// The routes run on fasthttp rather than net/http: per request it costs
// the front end about half the CPU (no per-request background read, no
// header maps), and on a machine whose CPUs the Python workers share that
// is throughput (bench/README.md). fasthttp does not notice a client that
// hangs up while its request runs; instead, a worker taking a request that
// waited in the queue checks that its client is still there and drops it
// if not (worker.dropAbandoned).
func (s *Server) HTTPServer(errorLog *log.Logger) *HTTPServer {
	srv := &fasthttp.Server{
		Handler:                      s.serveHTTP,
		ErrorHandler:                 s.httpError,
		ExpectHandler:                s.expectContinue,
		MaxRequestBodySize:           int(s.cfg.MaxPayload),
		ReadBufferSize:               readBufferSize,
		ReadTimeout:                  readTimeout,
		IdleTimeout:                  idleTimeout,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true, // bodies reach input_fn as sent
		CloseOnShutdown:              true,
	}
	if errorLog != nil {
		srv.Logger = errorLog
	} else {
		srv.Logger = log.New(os.Stderr, "", 0)
	}
	return &HTTPServer{fs: srv}
}

// MetricsHandler returns the Prometheus handler for the server's metrics,
// for a listener of its own.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// serveHTTP routes a request.
func (s *Server) serveHTTP(ctx *fasthttp.RequestCtx) {
	method := ctx.Method()
	switch p := string(ctx.Path()); p {
	case pathInvocations:
		if string(method) != http.MethodPost {
			methodNotAllowed(ctx, "POST")
			return
		}
		s.handleInvocations(ctx)
	case pathPing:
		if !ctx.IsGet() && !ctx.IsHead() {
			methodNotAllowed(ctx, "GET, HEAD")
			return
		}
		s.handlePing(ctx)
	case pathMetrics:
		if !ctx.IsGet() && !ctx.IsHead() {
			methodNotAllowed(ctx, "GET, HEAD")
			return
		}
		s.metricsHTTP(ctx)
	case pathHealth:
		if !ctx.IsGet() && !ctx.IsHead() {
			methodNotAllowed(ctx, "GET, HEAD")
			return
		}
		writeJSON(ctx, http.StatusOK, s.Health())
	default:
		if rest, ok := strings.CutPrefix(p, pathModelPrefix); ok {
			if name, ok := strings.CutSuffix(rest, "/invoke"); ok && !strings.Contains(name, "/") {
				if name != modelName {
					writeError(ctx, errorf(http.StatusNotFound, TypeNotFound,
						"model %q is not served here; this server serves one model, named %q", name, modelName), false)
					return
				}
				if string(method) != http.MethodPost {
					methodNotAllowed(ctx, "POST")
					return
				}
				s.handleInvocations(ctx)
				return
			}
		}
		writeError(ctx, errorf(http.StatusNotFound, TypeNotFound,
			"no route for %s %s; the model server answers GET /ping and POST /invocations", method, p), false)
	}
}

func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set("Allow", allow)
	writeError(ctx, errorf(http.StatusMethodNotAllowed, TypeMethodNotAllowed,
		"%s is not allowed on %s; use %s", ctx.Method(), ctx.Path(), allow), false)
}

// httpError answers a request the HTTP server could not read.
func (s *Server) httpError(ctx *fasthttp.RequestCtx, err error) {
	var e *Error
	var small *fasthttp.ErrSmallBuffer
	var netErr interface{ Timeout() bool }
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = s.tooLarge()
	case errors.As(err, &small):
		e = errorf(http.StatusRequestHeaderFieldsTooLarge, "RequestHeaderFieldsTooLarge",
			"the request line and headers exceed %d bytes", readBufferSize)
	case errors.As(err, &netErr) && netErr.Timeout():
		e = errorf(http.StatusRequestTimeout, "RequestTimeout", "the request was not received within %s", readTimeout)
	default:
		e = errorf(http.StatusBadRequest, TypeBadRequest, "malformed HTTP request: %v", err)
	}
	s.logger.Warn(e.Message, "code", e.Code, "type", e.Type, "remote", ctx.RemoteAddr().String())
	writeError(ctx, e, false)
	s.metrics.observeRequest(e.Code, 0)
}

// expectContinue answers "Expect: 100-continue" (curl sends it for bodies
// over 1 KiB): 413 at once for a body over the limit, so the client never
// sends it, else 100 Continue.
func (s *Server) expectContinue(ctx *fasthttp.RequestCtx) int {
	if int64(ctx.Request.Header.ContentLength()) > s.cfg.MaxPayload {
		s.logger.Warn(s.tooLarge().Message, "code", http.StatusRequestEntityTooLarge, "remote", ctx.RemoteAddr().String())
		s.metrics.observeRequest(http.StatusRequestEntityTooLarge, 0)
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusContinue
}

type pingBody struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// handlePing answers 200 {"status": "Healthy"} once every worker has
// loaded the model; 503 while loading, 500 when loading failed.
func (s *Server) handlePing(ctx *fasthttp.RequestCtx) {
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
	writeJSON(ctx, code, body)
}

func writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(code)
	ctx.SetBody(append(b, '\n'))
}

func (s *Server) tooLarge() *Error {
	return errorf(http.StatusRequestEntityTooLarge, TypePayloadTooLarge,
		"the request body exceeds the limit of %d bytes (raise it with SAGEMAKER_MAX_PAYLOAD_IN_MB or TS_MAX_REQUEST_SIZE)",
		s.cfg.MaxPayload)
}

// handleInvocations hands one request to a worker and writes its answer.
func (s *Server) handleInvocations(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	c := s.calls.Get().(*call)
	// The body is the server's buffer, valid until this handler returns,
	// which is after the worker has read it (see invoke).
	c.req.Body = ctx.PostBody()
	if sc, ok := ctx.Conn().(syscall.Conn); ok {
		c.conn = sc
	}
	hdr := &ctx.Request.Header
	c.req.ContentType = string(hdr.ContentType())
	c.req.Accept = string(hdr.Peek("Accept"))
	for name, value := range hdr.All() {
		c.req.Headers = append(c.req.Headers, wire.Header{Name: string(name), Value: string(value)})
	}
	if e := s.invoke(c); e != nil {
		s.release(c)
		s.fail(ctx, start, e)
		return
	}
	resp := &ctx.Response
	for _, kv := range c.headers {
		if allowedResponseHeader(kv.Name) {
			resp.Header.Add(kv.Name, kv.Value)
		}
	}
	// A status the handler set through the context is its answer, body
	// and all (an empty body gets the JSON error instead).
	if c.err != nil && (c.err.Type != TypeResponseStatus || len(c.body) == 0) {
		s.fail(ctx, start, c.err)
		s.release(c)
		return
	}
	if c.err != nil {
		s.logger.Log(context.Background(), slogLevelFor(c.err.Code), c.err.Message,
			"code", c.err.Code, "type", c.err.Type, "path", string(ctx.Path()))
	}
	if c.contentType != "" {
		resp.Header.SetContentType(c.contentType)
	}
	resp.SetStatusCode(c.status)
	// The body aliases the worker's answer buffer, which is not reused.
	resp.SetBodyRaw(c.body)
	s.metrics.observeRequest(c.status, time.Since(start))
	s.release(c)
}

// fail writes e, logs it and counts it.
func (s *Server) fail(ctx *fasthttp.RequestCtx, start time.Time, e *Error) {
	if e.Type == "" {
		e.Type = strings.ReplaceAll(http.StatusText(e.Code), " ", "")
	}
	attrs := []any{"code", e.Code, "type", e.Type, "path", string(ctx.Path())}
	if e.Traceback != "" {
		attrs = append(attrs, "traceback", e.Traceback)
	}
	s.logger.Log(context.Background(), slogLevelFor(e.Code), e.Message, attrs...)
	writeError(ctx, e, s.cfg.IncludeTraceback)
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
