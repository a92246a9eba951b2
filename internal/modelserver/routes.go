package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/wire"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
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
	return newHTTPServer(s, routeOptions{
		logger:           s.logger,
		metrics:          s.metrics,
		maxPayload:       s.cfg.MaxPayload,
		includeTraceback: s.cfg.IncludeTraceback,
	}, errorLog)
}

// Invoker is what the HTTP routes serve: one model (a *Server) or,
// later, a chain of containers that runs each request stage after stage.
type Invoker interface {
	// Invoke runs req and fills resp. A non-nil error (an *Error) is
	// the answer, as a JSON error body with the headers in resp.Headers
	// (those a handler set before failing); otherwise resp is the answer,
	// whatever its status.
	Invoke(ctx context.Context, req *Request, resp *Response) error
	// Health is what /ping and /_sagebox/health report.
	Health() Health
}

// Request is one invocation as the routes hand it to an Invoker. Its
// fields alias the HTTP server's buffers, valid until Invoke returns.
type Request struct {
	Body        []byte
	ContentType string
	Accept      string
	Headers     []wire.Header
	// Original is the request the model server received, when this one
	// is a later stage's of a serial pipeline (Serial sets it); nil means
	// the request is its own original.
	Original *wire.Original
	// Conn is the client's connection when the HTTP server exposes its
	// socket (nil otherwise), to see whether the client is still there.
	Conn syscall.Conn
}

// Response is an Invoker's answer. The routes write it and keep none of
// it; Body may alias a buffer the Invoker does not reuse.
type Response struct {
	Status      int
	ContentType string
	Headers     []wire.Header
	Body        []byte
	// Err is set when the answer is a handler's own error status (a
	// status of 400 or more set through the context, with a body): the
	// routes send the answer as it is and log Err.
	Err *Error
}

// routeOptions are what the routes need besides their Invoker.
type routeOptions struct {
	logger           *slog.Logger
	metrics          *metrics
	maxPayload       int64
	includeTraceback bool
}

// routes are the HTTP routes over an Invoker.
type routes struct {
	routeOptions
	inv         Invoker
	metricsHTTP fasthttp.RequestHandler
	exchanges   sync.Pool // *exchange
}

// exchange is a pooled Request and Response, so that an invocation
// allocates nothing of its own on the way through the routes.
type exchange struct {
	req  Request
	resp Response
}

// newHTTPServer serves inv's routes.
func newHTTPServer(inv Invoker, o routeOptions, errorLog *log.Logger) *HTTPServer {
	rt := &routes{routeOptions: o, inv: inv, metricsHTTP: fasthttpadaptor.NewFastHTTPHandler(o.metrics.handler())}
	rt.exchanges.New = func() any { return new(exchange) }
	srv := &fasthttp.Server{
		Handler:                      rt.serveHTTP,
		ErrorHandler:                 rt.httpError,
		ExpectHandler:                rt.expectContinue,
		MaxRequestBodySize:           int(o.maxPayload),
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
func (s *routes) serveHTTP(ctx *fasthttp.RequestCtx) {
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
		writeJSON(ctx, http.StatusOK, s.inv.Health())
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
func (s *routes) httpError(ctx *fasthttp.RequestCtx, err error) {
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
func (s *routes) expectContinue(ctx *fasthttp.RequestCtx) int {
	if int64(ctx.Request.Header.ContentLength()) > s.maxPayload {
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
func (s *routes) handlePing(ctx *fasthttp.RequestCtx) {
	h := s.inv.Health()
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

func (s *routes) tooLarge() *Error {
	return errorf(http.StatusRequestEntityTooLarge, TypePayloadTooLarge,
		"the request body exceeds the limit of %d bytes (raise it with SAGEMAKER_MAX_PAYLOAD_IN_MB or TS_MAX_REQUEST_SIZE)",
		s.maxPayload)
}

// handleInvocations hands one request to the Invoker and writes its
// answer.
func (s *routes) handleInvocations(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	x := s.exchanges.Get().(*exchange)
	defer s.release(x)
	req := &x.req
	// The body is the server's buffer, valid until this handler returns,
	// which is after the Invoker is done with it.
	req.Body = ctx.PostBody()
	if sc, ok := ctx.Conn().(syscall.Conn); ok {
		req.Conn = sc
	}
	hdr := &ctx.Request.Header
	req.ContentType = string(hdr.ContentType())
	req.Accept = string(hdr.Peek("Accept"))
	for name, value := range hdr.All() {
		req.Headers = append(req.Headers, wire.Header{Name: string(name), Value: string(value)})
	}
	// Not ctx: fasthttp ends it when the server shuts down, and a drain
	// lets accepted requests finish.
	err := s.inv.Invoke(context.Background(), req, &x.resp)
	answer := &x.resp
	resp := &ctx.Response
	for _, kv := range answer.Headers {
		if allowedResponseHeader(kv.Name) {
			resp.Header.Add(kv.Name, kv.Value)
		}
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = errorf(http.StatusInternalServerError, TypeInternal, "%v", err)
		}
		s.fail(ctx, start, e)
		return
	}
	if e := answer.Err; e != nil {
		s.logger.Log(context.Background(), slogLevelFor(e.Code), e.Message,
			"code", e.Code, "type", e.Type, "path", string(ctx.Path()))
	}
	if answer.ContentType != "" {
		resp.Header.SetContentType(answer.ContentType)
	}
	resp.SetStatusCode(answer.Status)
	// The body aliases the Invoker's answer buffer, which it does not reuse.
	resp.SetBodyRaw(answer.Body)
	s.metrics.observeRequest(answer.Status, time.Since(start))
}

// release returns x to the pool, keeping its header slice.
func (s *routes) release(x *exchange) {
	hs := x.req.Headers
	clear(hs)
	*x = exchange{req: Request{Headers: hs[:0]}}
	s.exchanges.Put(x)
}

// fail writes e, logs it and counts it.
func (s *routes) fail(ctx *fasthttp.RequestCtx, start time.Time, e *Error) {
	if e.Type == "" {
		e.Type = strings.ReplaceAll(http.StatusText(e.Code), " ", "")
	}
	attrs := []any{"code", e.Code, "type", e.Type, "path", string(ctx.Path())}
	if e.Traceback != "" {
		attrs = append(attrs, "traceback", e.Traceback)
	}
	s.logger.Log(context.Background(), slogLevelFor(e.Code), e.Message, attrs...)
	writeError(ctx, e, s.includeTraceback)
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
