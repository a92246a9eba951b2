package invoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// Defaults, SageMaker's.
const (
	// DefaultMaxPayload is InvokeEndpoint's body limit: 6 MB.
	DefaultMaxPayload = 6 << 20
	// DefaultTimeout is how long an instance has to answer.
	DefaultTimeout = 60 * time.Second
)

// The InvokeEndpoint request and response headers.
const (
	HeaderCustomAttributes = "X-Amzn-Sagemaker-Custom-Attributes"
	HeaderTargetVariant    = "X-Amzn-Sagemaker-Target-Variant"
	HeaderTargetContainer  = "X-Amzn-Sagemaker-Target-Container-Hostname"
	HeaderInferenceID      = "X-Amzn-Sagemaker-Inference-Id"
	HeaderTargetModel      = "X-Amzn-Sagemaker-Target-Model"
	HeaderInvokedVariant   = "X-Amzn-Invoked-Production-Variant"
)

// dialAttempts is how many connections a request may try before it is
// answered ServiceUnavailable; dialWait says how long to wait before
// each, to let hosting publish the route that replaces a dead instance.
const dialAttempts = 5

func dialWait(attempt int) time.Duration {
	switch attempt {
	case 0, 1:
		return 0
	case 2:
		return 10 * time.Millisecond
	case 3:
		return 50 * time.Millisecond
	}
	return 200 * time.Millisecond
}

// Config configures a Handler.
type Config struct {
	Region    string
	AccountID string
	// MaxPayload is the largest request body accepted; DefaultMaxPayload
	// when 0.
	MaxPayload int64
	// Registerer receives the endpoint metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Timeout is how long an instance has to take the request and to
	// answer it (each; the answer read in full); DefaultTimeout when 0.
	Timeout time.Duration
	// Now is the clock for latencies; time.Now when nil.
	Now func() time.Time
}

// Handler serves InvokeEndpoint: POST /endpoints/{name}/invocations,
// forwarded to an instance of the endpoint's route in Table.
type Handler struct {
	cfg     Config
	table   *Table
	client  *fasthttp.Client
	metrics *metrics
	logger  *slog.Logger
	// bodies are request body buffers (*[]byte) for reuse: the client
	// writes a request on the calling goroutine, so once Do returns
	// nothing holds the body.
	bodies sync.Pool
	ids    requestIDs
	// beforeCount, when set (tests), runs between reading the table and
	// counting the picked instance: where hosting's Set may come.
	beforeCount func()
}

// NewHandler returns the InvokeEndpoint handler over t. It fails only when
// the metrics cannot be registered (registered twice).
func NewHandler(t *Table, cfg Config) (*Handler, error) {
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register endpoint metrics: %w", err)
	}
	h := &Handler{
		cfg:     cfg,
		table:   t,
		client:  newClient(cfg.Timeout),
		metrics: m,
		logger:  cfg.Logger.With("system", "invoke"),
	}
	return h, nil
}

// Close drops the idle connections to instances.
func (h *Handler) Close() { h.client.CloseIdleConnections() }

// request is one invocation's parsed headers.
type request struct {
	endpoint        string
	contentType     string
	accept          string
	customAttrs     string
	hasCustomAttrs  bool
	targetVariant   string
	targetContainer string
	inferenceID     string
}

// ServeHTTP answers one InvokeEndpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.cfg.Now()
	requestID := h.ids.next()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSONError(w, requestID, http.StatusMethodNotAllowed, "MethodNotAllowedException",
			errorBody{Type: "MethodNotAllowedException", Message: "InvokeEndpoint is POST /endpoints/<name>/invocations"})
		return
	}
	name, ok := EndpointName(r.URL.Path)
	if op := unservedOperation(r.URL.Path); !ok && op != "" {
		writeJSONError(w, requestID, http.StatusBadRequest, CodeValidation,
			errorBody{Type: CodeValidation, Message: "sagebox does not serve " + op + "; its endpoints are real-time only: use InvokeEndpoint (POST /endpoints/<name>/invocations)"})
		return
	}
	if !ok {
		writeJSONError(w, requestID, http.StatusNotFound, "UnknownOperationException",
			errorBody{Type: "UnknownOperationException", Message: "no sagemaker-runtime operation at " + r.URL.Path + "; InvokeEndpoint is POST /endpoints/<name>/invocations"})
		return
	}
	req, apiErr := parseRequest(name, r.Header)
	if apiErr != nil {
		h.refuse(w, r, requestID, apiErr)
		return
	}
	_, rt := h.table.lookup(name)
	if apiErr = h.checkRoute(req, rt); apiErr != nil {
		h.refuse(w, r, requestID, apiErr)
		return
	}
	body, apiErr := h.readBody(r)
	if body != nil {
		defer h.putBody(body)
	}
	if apiErr != nil {
		if apiErr.status == http.StatusRequestEntityTooLarge {
			h.drainOversized(r)
		}
		w.Header().Set("Connection", "close")
		h.refuse(w, r, requestID, apiErr)
		return
	}
	h.forward(w, r, requestID, req, body, start)
}

// unservedOperation names the sagemaker-runtime operation at p that sagebox
// does not serve, or returns "".
func unservedOperation(p string) string {
	switch {
	case strings.HasSuffix(p, "/async-invocations"):
		return "InvokeEndpointAsync"
	case strings.HasSuffix(p, "/invocations-response-stream"):
		return "InvokeEndpointWithResponseStream"
	}
	return ""
}

// EndpointName returns the endpoint named by an InvokeEndpoint path,
// /endpoints/<name>/invocations, and whether p is one.
func EndpointName(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "/endpoints/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/invocations")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// refuse answers a request sagebox turns down before any instance sees it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, requestID string, e *apiError) {
	h.logger.Info("invocation refused", "request_id", requestID, "path", r.URL.Path, "code", e.code, "message", e.msg)
	h.writeAPIError(w, requestID, e)
}

// checkRoute says why rt cannot take req, or nil.
func (h *Handler) checkRoute(req *request, rt *route) *apiError {
	if rt == nil {
		return validationf("Endpoint %s of account %s not found.", req.endpoint, h.cfg.AccountID)
	}
	if !rt.serving() {
		status := rt.status
		if status == "" {
			status = "starting"
		}
		msg := fmt.Sprintf("Endpoint %s of account %s is %s, not InService, and serves no requests", rt.name, h.cfg.AccountID, status)
		switch status {
		case "Failed":
			msg += "; DescribeEndpoint's FailureReason says why it failed: fix that and update or re-create the endpoint."
		case "Deleting":
			msg += "; it is being deleted."
		default:
			msg += "; wait until DescribeEndpoint shows it InService."
		}
		return validationf("%s", msg)
	}
	switch rt.mode {
	case "Direct":
		if req.targetContainer == "" {
			return validationf("Endpoint %s is a multi-container endpoint in Direct mode: name the container with TargetContainerHostname (one of %s).",
				rt.name, strings.Join(rt.containers, ", "))
		}
		found := false
		for _, c := range rt.containers {
			if c == req.targetContainer {
				found = true
				break
			}
		}
		if !found {
			return validationf("Container hostname %s not found in endpoint %s; its containers are %s.",
				req.targetContainer, rt.name, strings.Join(rt.containers, ", "))
		}
	default:
		if req.targetContainer != "" {
			what := "a single-container endpoint"
			if rt.mode == "Serial" {
				what = "a serial inference pipeline"
			}
			return validationf("TargetContainerHostname is only for multi-container endpoints in Direct mode; endpoint %s is %s.", rt.name, what)
		}
	}
	if req.targetVariant != "" {
		v := rt.variant(req.targetVariant)
		if v == nil {
			return validationf("The variant %s was not found for endpoint %s; its variants are %s.",
				req.targetVariant, rt.name, variantNames(rt))
		}
		if len(v.instances) == 0 {
			return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
				msg: fmt.Sprintf("Variant %s of endpoint %s has no instance serving; retry once it has.", v.name, rt.name)}
		}
	} else if len(rt.weighted) == 0 {
		return validationf("Endpoint %s has no variant with a weight above 0 to send traffic to; set a weight with UpdateEndpointWeightsAndCapacities or name a variant with TargetVariant.", rt.name)
	}
	return nil
}

func variantNames(rt *route) string {
	var s []string
	for _, v := range rt.variants {
		s = append(s, v.name)
	}
	return strings.Join(s, ", ")
}

// readBody reads the payload, never more than the limit (and one byte).
func (h *Handler) readBody(r *http.Request) ([]byte, *apiError) {
	max := h.cfg.MaxPayload
	tooLarge := func() *apiError {
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeTooLarge,
			msg: fmt.Sprintf("The request body exceeds InvokeEndpoint's limit of %d bytes; send a smaller payload (batch transform takes larger ones).", max)}
	}
	if r.ContentLength > max {
		return nil, tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf []byte
	if r.ContentLength >= 0 {
		// Exactly the declared length; net/http ends the body there.
		buf = h.getBody(int(r.ContentLength))
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			h.putBody(buf)
			return nil, &apiError{status: http.StatusBadRequest, code: CodeValidation, msg: "cannot read the request body: " + err.Error()}
		}
		return buf, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: CodeValidation, msg: "cannot read the request body: " + err.Error()}
	}
	if int64(len(b)) > max {
		return nil, tooLarge()
	}
	return b, nil
}

// drainFactor bounds how much of an oversized body is read and thrown
// away before the 413: up to this many times the limit.
const drainFactor = 4

// drainOversized reads and discards the rest of a body somewhat over the
// limit, so that the client, still sending it, receives the 413 instead of
// a reset connection (which botocore reports as ConnectionClosedError and
// retries five times). A body far over the limit is not read: the
// connection closes, as the limit promises.
func (h *Handler) drainOversized(r *http.Request) {
	if r.Body == nil || r.ContentLength > drainFactor*h.cfg.MaxPayload {
		return
	}
	io.CopyN(io.Discard, r.Body, drainFactor*h.cfg.MaxPayload)
}

// getBody returns a buffer of n bytes, reused when one is free.
func (h *Handler) getBody(n int) []byte {
	if p, ok := h.bodies.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n, max(n, 4<<10))
}

// maxPooledBody bounds the buffers kept: a 6 MB body is read into a new one.
const maxPooledBody = 2 << 20

func (h *Handler) putBody(b []byte) {
	if cap(b) > maxPooledBody {
		return
	}
	b = b[:0]
	h.bodies.Put(&b)
}

// forward sends the request to an instance and writes its answer.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, requestID string, req *request, body []byte, start time.Time) {
	var tried []string // instances whose dial failed
	for attempt := 0; ; attempt++ {
		snap, rt := h.table.lookup(req.endpoint)
		if apiErr := h.checkRoute(req, rt); apiErr != nil {
			// The route changed under a retry (deleted, or the variant gone).
			h.refuse(w, r, requestID, apiErr)
			return
		}
		v, in := h.pick(snap, rt, req, tried)
		if in == nil {
			if attempt+1 >= dialAttempts {
				h.unavailable(w, r, requestID, rt, v, tried)
				return
			}
			// Every instance of the variant refused: wait for hosting to
			// publish their replacements, then try them all again.
			if !sleepCtx(r.Context(), dialWait(attempt+1)) {
				return
			}
			tried = tried[:0]
			continue
		}
		done := h.roundTrip(w, r, requestID, req, rt, v, in, body, start)
		in.n.n.Add(-1)
		if done {
			return
		}
		tried = append(tried, in.id)
		if attempt+1 >= dialAttempts {
			h.unavailable(w, r, requestID, rt, v, tried)
			return
		}
		if !sleepCtx(r.Context(), dialWait(attempt+1)) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pick chooses the variant (the target, or by weight) and its least
// loaded instance not in tried, counted as outstanding. If the table
// changed meanwhile and no longer names the instance, the count is given
// back and the pick made again on the new snapshot: so once hosting's Set
// has returned, every request that can still reach a removed instance is
// in its Outstanding count.
func (h *Handler) pick(snap *snapshot, rt *route, req *request, tried []string) (*variant, *instance) {
	for {
		var v *variant
		if req.targetVariant != "" {
			v = rt.variant(req.targetVariant)
		} else {
			v = rt.pickVariant(rand.Float64())
		}
		if v == nil {
			return nil, nil
		}
		if h.beforeCount != nil {
			h.beforeCount()
		}
		in := pickExcept(v, tried)
		if in == nil {
			return v, nil
		}
		now, nrt := h.table.lookup(req.endpoint)
		if now == snap || (nrt != nil && nrt.has(in.id)) {
			return v, in
		}
		in.n.n.Add(-1)
		if nrt == nil || h.checkRoute(req, nrt) != nil {
			// Gone or changed beyond use: the caller's check answers.
			return v, nil
		}
		snap, rt = now, nrt
	}
}

// pickExcept is pickInstance over the instances not in tried.
func pickExcept(v *variant, tried []string) *instance {
	if len(tried) == 0 {
		return v.pickInstance(rand.IntN(len(v.instances)))
	}
	left := make([]*instance, 0, len(v.instances))
	for _, in := range v.instances {
		skip := false
		for _, id := range tried {
			if in.id == id {
				skip = true
				break
			}
		}
		if !skip {
			left = append(left, in)
		}
	}
	if len(left) == 0 {
		return nil
	}
	sub := &variant{name: v.name, instances: left}
	return sub.pickInstance(rand.IntN(len(left)))
}

// unavailable answers when no instance accepted a connection: nothing
// reached a model, so a client's retry is safe (botocore retries 503).
func (h *Handler) unavailable(w http.ResponseWriter, r *http.Request, requestID string, rt *route, v *variant, tried []string) {
	vn := ""
	if v != nil {
		vn = v.name
	}
	h.logger.Warn("no instance accepted the invocation", "request_id", requestID, "endpoint", rt.name, "variant", vn, "tried", tried)
	h.writeAPIError(w, requestID, &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
		msg: fmt.Sprintf("No instance of variant %s of endpoint %s accepted the request (it was not run); retry shortly.", vn, rt.name)})
}

// roundTrip sends the request to in and writes the answer. done is false
// only when the connection could not be made (nothing was sent, nothing
// written to w): the caller may try another instance. A request that was
// sent is never sent again.
func (h *Handler) roundTrip(w http.ResponseWriter, r *http.Request, requestID string, req *request, rt *route, v *variant, in *instance, body []byte, start time.Time) (done bool) {
	out := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(out)
	defer fasthttp.ReleaseResponse(resp)
	out.SetRequestURI(in.url)
	oh := &out.Header
	oh.SetMethod(http.MethodPost)
	oh.SetHost("localhost")
	// Exactly the client's headers: no default Content-Type added.
	oh.SetNoDefaultContentType(true)
	if req.contentType != "" {
		oh.SetContentType(req.contentType)
	}
	if req.accept != "" {
		oh.Set("Accept", req.accept)
	}
	if req.hasCustomAttrs {
		oh.Set(HeaderCustomAttributes, req.customAttrs)
	}
	if req.targetVariant != "" {
		oh.Set(HeaderTargetVariant, req.targetVariant)
	}
	if req.targetContainer != "" {
		oh.Set(HeaderTargetContainer, req.targetContainer)
	}
	if req.inferenceID != "" {
		oh.Set(HeaderInferenceID, req.inferenceID)
	}
	oh.Set("X-Amzn-Requestid", requestID)
	out.SetBodyRaw(body)
	resp.Header.SetNoDefaultContentType(true)

	vm := h.metrics.of(rt.name, v)
	sent := h.cfg.Now()
	err := h.client.Do(out, resp)
	if err != nil && isDialError(err) {
		h.logger.Info("instance refused the connection; trying another", "request_id", requestID, "endpoint", rt.name,
			"variant", v.name, "instance", in.id, "error", err)
		return false
	}
	model := h.cfg.Now().Sub(sent)
	vm.invocations.Inc()
	vm.model.Observe(model.Seconds())
	defer func() { vm.overhead.Observe((h.cfg.Now().Sub(start) - model).Seconds()) }()
	if err != nil {
		vm.modelErrors.Inc()
		h.writeModelFailure(w, requestID, rt, v, in, req, err)
		return true
	}
	status := resp.StatusCode()
	if status < 200 || status > 299 {
		vm.modelErrors.Inc()
		if status >= 500 {
			vm.errors5xx.Inc()
		} else if status >= 400 {
			vm.errors4xx.Inc()
		}
		container := string(resp.Header.Peek(HeaderContainer))
		if container == "" {
			container = defaultContainer(rt, req)
		}
		msg := strings.TrimRight(string(resp.Body()), "\r\n")
		h.logger.Info("model error", "request_id", requestID, "endpoint", rt.name, "variant", v.name, "instance", in.id,
			"container", container, "status", status)
		writeJSONError(w, requestID, http.StatusFailedDependency, CodeModel, h.modelError(rt.name, container, status, msg))
		return true
	}
	wh := w.Header()
	// The header values share one array: one allocation, not five.
	vals := make([]string, 5)
	if ct := resp.Header.ContentType(); len(ct) > 0 {
		vals[0] = string(ct)
		wh["Content-Type"] = vals[0:1:1]
	} else {
		// None, and none sniffed: the client's SDK supplies its default.
		wh["Content-Type"] = nil
	}
	if ca := resp.Header.Peek(HeaderCustomAttributes); ca != nil {
		vals[1] = string(ca)
		wh[HeaderCustomAttributes] = vals[1:2:2]
	}
	vals[2], vals[3] = v.name, requestID
	wh[HeaderInvokedVariant] = vals[2:3:3]
	wh["X-Amzn-Requestid"] = vals[3:4:4]
	b := resp.Body()
	vals[4] = itoa(len(b))
	wh["Content-Length"] = vals[4:5:5]
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return true
}

// defaultContainer names the container in a ModelError when the instance
// did not: the targeted one in Direct mode, else "primary".
func defaultContainer(rt *route, req *request) string {
	if req.targetContainer != "" {
		return req.targetContainer
	}
	return containerPrimary
}

// writeModelFailure answers an invocation whose instance gave no answer
// after the request was sent: a timeout, or a connection that broke (the
// instance crashed). It is a ModelError, as SageMaker answers a timeout
// ("Received server error (0) ..."), never a 5xx: botocore retries 5xx,
// and the request reached the model, so a retry would run predict_fn
// again.
func (h *Handler) writeModelFailure(w http.ResponseWriter, requestID string, rt *route, v *variant, in *instance, req *request, err error) {
	container := defaultContainer(rt, req)
	var msg string
	var te interface{ Timeout() bool }
	switch {
	case errors.As(err, &te) && te.Timeout():
		msg = fmt.Sprintf("Your invocation timed out while waiting for a response from container %s (limit %s). Review the model latency metrics, resolve the issue, and try again.", container, h.cfg.Timeout)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		msg = fmt.Sprintf("The model's response exceeds %d bytes.", maxResponse)
	default:
		msg = "The instance closed the connection before answering; it may have crashed. Check the endpoint's logs."
	}
	h.logger.Warn("instance failed during an invocation", "request_id", requestID, "endpoint", rt.name, "variant", v.name,
		"instance", in.id, "error", err)
	writeJSONError(w, requestID, http.StatusFailedDependency, CodeModel, h.modelError(rt.name, container, 0, msg))
}
