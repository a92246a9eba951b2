// Package router sends each request arriving on sagebox's single address to
// the service it is meant for, the way AWS would by host name:
//
//	POST / with X-Amz-Target: SageMaker.* or Logs_20140328.*  → control plane (AWS JSON 1.1)
//	POST /endpoints/<name>/invocations                      → sagemaker-runtime
//	POST /endpoints/<name>/async-invocations (no query), and
//	  /invocations-response-stream                           → sagemaker-runtime (refused there)
//	POST / with a form body (Action=...)                    → STS/IAM Query calls
//	/_sagebox/...                                            → sagebox's own routes (health, metrics)
//	anything else                                            → S3 (path-style or virtual-host)
//
// Bucket names cannot start with "_", so /_sagebox/ never shadows a bucket.
// When credentials are configured every request but the health check must
// carry a valid SigV4 signature; the error is written in the protocol of the
// service that was addressed (XML for S3, JSON otherwise).
package router

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"log/slog"
	"net/http"
	"strings"
)

// Authenticator checks a request's signature. A nil Authenticator lets every
// request through (the loopback default).
type Authenticator interface {
	// Authenticate returns nil when the request, addressed to svc, may
	// proceed, or an error that is (or wraps) an AuthError naming the AWS
	// error code and HTTP status. It must check what the headers prove
	// before reading the body, and read no more of it than svc accepts.
	Authenticate(r *http.Request, svc Service) error
}

// AuthError is what an Authenticator returns on failure.
type AuthError interface {
	error
	Code() string
	Status() int
}

// clientMessager is an AuthError that words its message for the client
// (without the Go error's prefix); Error() is sent otherwise.
type clientMessager interface {
	ClientMessage() string
}

// Routes are the services behind the single address. A nil handler answers
// 404 (or 501 for an API that is not built yet).
type Routes struct {
	JSON    http.Handler // SageMaker.* and Logs_20140328.* targets
	Runtime http.Handler // POST /endpoints/<name>/invocations
	S3      http.Handler
	Query   http.Handler // AWS Query protocol (STS GetCallerIdentity, IAM GetRole)
	Health  func() error // nil error → 200
	Metrics http.Handler // /_sagebox/metrics
}

// Router is the top-level http.Handler.
type Router struct {
	routes Routes
	auth   Authenticator
	logger *slog.Logger
}

// New returns a Router over routes. auth may be nil.
func New(routes Routes, auth Authenticator, logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.Default()
	}
	return &Router{routes: routes, auth: auth, logger: logger.With("system", "router")}
}

// Service names what a request addresses.
type Service int

// The services on the single address.
const (
	ServiceS3 Service = iota
	ServiceJSON
	ServiceRuntime
	ServiceSagebox
	ServiceQuery
)

// Classify says which service r is for.
func Classify(r *http.Request) Service {
	switch {
	case strings.HasPrefix(r.URL.Path, "/_sagebox/"):
		return ServiceSagebox
	case r.Header.Get("X-Amz-Target") != "":
		return ServiceJSON
	case r.Method == http.MethodPost && isInvocationsPath(r.URL.Path):
		return ServiceRuntime
	case r.Method == http.MethodPost && r.URL.RawQuery == "" && isUnservedRuntimePath(r.URL.Path):
		// S3 has no query-less POST on an object, so this is the runtime's.
		return ServiceRuntime
	case r.Method == http.MethodPost && r.URL.Path == "/" &&
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		// S3 has no operation on POST /, so a form POST there is a Query call.
		return ServiceQuery
	default:
		return ServiceS3
	}
}

// isInvocationsPath reports whether p is /endpoints/<name>/invocations with
// a name of one path segment: the only path of sagemaker-runtime's
// InvokeEndpoint. Any other path under /endpoints/ is a key in an S3 bucket
// named "endpoints".
func isInvocationsPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/endpoints/")
	if !ok {
		return false
	}
	name, ok := strings.CutSuffix(rest, "/invocations")
	return ok && name != "" && !strings.Contains(name, "/")
}

// isUnservedRuntimePath reports whether p is the path of a sagemaker-runtime
// operation sagebox does not serve (InvokeEndpointAsync,
// InvokeEndpointWithResponseStream): /endpoints/<name>/async-invocations or
// /endpoints/<name>/invocations-response-stream. The runtime handler then
// says so in JSON; before, S3 answered these with an XML MethodNotAllowed
// that botocore showed as a bare "(405)", e.g. for the SageMaker Python
// SDK's AsyncPredictor.predict_async.
func isUnservedRuntimePath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/endpoints/")
	if !ok {
		return false
	}
	for _, op := range []string{"/async-invocations", "/invocations-response-stream"} {
		if name, ok := strings.CutSuffix(rest, op); ok && name != "" && !strings.Contains(name, "/") {
			return true
		}
	}
	return false
}

// String names the service, as metrics label it.
func (s Service) String() string {
	switch s {
	case ServiceS3:
		return "s3"
	case ServiceJSON:
		return "json"
	case ServiceRuntime:
		return "runtime"
	case ServiceSagebox:
		return "sagebox"
	case ServiceQuery:
		return "query"
	}
	return "unknown"
}

// ServeHTTP dispatches r.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	svc := Classify(r)
	if svc == ServiceSagebox && r.URL.Path == "/_sagebox/health" {
		rt.handleHealth(w, r)
		return
	}
	if rt.auth != nil {
		if err := rt.auth.Authenticate(r, svc); err != nil {
			rt.writeAuthError(w, r, svc, err)
			return
		}
	}
	switch svc {
	case ServiceSagebox:
		if r.URL.Path == "/_sagebox/metrics" && rt.routes.Metrics != nil {
			rt.routes.Metrics.ServeHTTP(w, r)
			return
		}
		writeJSONError(w, http.StatusNotFound, "NotFound", "no such sagebox route: "+r.URL.Path)
	case ServiceJSON:
		serveOr(w, r, rt.routes.JSON, "this API is not available in this build")
	case ServiceRuntime:
		serveOr(w, r, rt.routes.Runtime, "endpoints are not available in this build yet")
	case ServiceQuery:
		serveOr(w, r, rt.routes.Query, "the AWS Query protocol is not available in this build")
	default:
		if rt.routes.S3 == nil {
			http.Error(w, "S3 is not available", http.StatusNotImplemented)
			return
		}
		rt.routes.S3.ServeHTTP(w, r)
	}
}

func serveOr(w http.ResponseWriter, r *http.Request, h http.Handler, msg string) {
	if h == nil {
		writeJSONError(w, http.StatusNotImplemented, "UnknownOperationException", msg)
		return
	}
	h.ServeHTTP(w, r)
}

func (rt *Router) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if rt.routes.Health != nil {
		if err := rt.routes.Health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]string{"status": "unhealthy", "error": err.Error()})
			return
		}
	}
	json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
}

func (rt *Router) writeAuthError(w http.ResponseWriter, r *http.Request, svc Service, err error) {
	code, status, msg := "AccessDenied", http.StatusForbidden, err.Error()
	var ae AuthError
	if errors.As(err, &ae) {
		code, status = ae.Code(), ae.Status()
	}
	var cm clientMessager
	if errors.As(err, &cm) {
		msg = cm.ClientMessage()
	}
	rt.logger.Info("request refused", "method", r.Method, "path", r.URL.Path, "code", code, "error", err)
	if svc == ServiceS3 || svc == ServiceQuery {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method == http.MethodHead {
			return
		}
		type s3Error struct {
			XMLName xml.Name `xml:"Error"`
			Code    string
			Message string
		}
		w.Write([]byte(xml.Header))
		xml.NewEncoder(w).Encode(s3Error{Code: code, Message: msg})
		return
	}
	writeJSONError(w, status, code, msg)
}

func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("x-amzn-ErrorType", code)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
