package router

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type named string

func (n named) ServeHTTP(w http.ResponseWriter, r *http.Request) { io.WriteString(w, string(n)) }

type authErr struct{}

func (authErr) Error() string { return "signature does not match" }
func (authErr) Code() string  { return "SignatureDoesNotMatch" }
func (authErr) Status() int   { return http.StatusForbidden }

type denyAll struct{}

func (denyAll) Authenticate(*http.Request, Service) error { return authErr{} }

// wrapping returns its error wrapped, as an adapter adding context would.
type wrapping struct{ err error }

func (w wrapping) Authenticate(*http.Request, Service) error {
	return fmt.Errorf("authenticate: %w", w.err)
}

// recordService remembers which service the router asked about.
type recordService struct{ got *Service }

func (a recordService) Authenticate(_ *http.Request, svc Service) error {
	*a.got = svc
	return nil
}

func TestAuthenticatorLearnsTheService(t *testing.T) {
	var got Service = -1
	rt := New(Routes{JSON: named("json"), S3: named("s3"), Query: named("query")}, recordService{&got}, nil)
	for _, c := range []struct {
		method, path, target, ctype string
		want                        Service
	}{
		{"POST", "/", "SageMaker.ListTrainingJobs", "", ServiceJSON},
		{"PUT", "/b/k", "", "", ServiceS3},
		{"POST", "/", "", "application/x-www-form-urlencoded", ServiceQuery},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.target != "" {
			req.Header.Set("X-Amz-Target", c.target)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		rt.ServeHTTP(httptest.NewRecorder(), req)
		if got != c.want {
			t.Errorf("%s %s: authenticator saw service %d, want %d", c.method, c.path, got, c.want)
		}
	}
}

func TestWrappedAuthErrorKeepsItsCode(t *testing.T) {
	rt := New(Routes{S3: named("s3")}, wrapping{authErr{}}, nil)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/bucket/key", nil))
	if w.Code != 403 || !strings.Contains(w.Body.String(), "<Code>SignatureDoesNotMatch</Code>") {
		t.Errorf("wrapped auth error = %d %s, want 403 SignatureDoesNotMatch", w.Code, w.Body)
	}
	rt = New(Routes{S3: named("s3")}, wrapping{tooLarge{}}, nil)
	w = httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/bucket/key", nil))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("wrapped 413 auth error answered %d", w.Code)
	}
}

type tooLarge struct{}

func (tooLarge) Error() string { return "too large" }
func (tooLarge) Code() string  { return "EntityTooLarge" }
func (tooLarge) Status() int   { return http.StatusRequestEntityTooLarge }

func TestRouting(t *testing.T) {
	rt := New(Routes{JSON: named("json"), Runtime: named("runtime"), S3: named("s3"), Query: named("query"), Metrics: named("metrics")}, nil, nil)
	cases := []struct {
		name, method, path string
		header             map[string]string
		want               string
	}{
		{"sagemaker target", "POST", "/", map[string]string{"X-Amz-Target": "SageMaker.CreateTrainingJob"}, "json"},
		{"logs target", "POST", "/", map[string]string{"X-Amz-Target": "Logs_20140328.GetLogEvents"}, "json"},
		{"invoke endpoint", "POST", "/endpoints/my-ep/invocations", nil, "runtime"},
		{"invoke endpoint, query string", "POST", "/endpoints/my-ep/invocations?x=1", nil, "runtime"},
		{"invoke endpoint async", "POST", "/endpoints/my-ep/async-invocations", nil, "runtime"},
		{"invoke endpoint with response stream", "POST", "/endpoints/my-ep/invocations-response-stream", nil, "runtime"},
		{"bucket named endpoints, POST async-invocations key with a query", "POST", "/endpoints/my-ep/async-invocations?uploads", nil, "s3"},
		{"bucket named endpoints, POST deeper async-invocations key", "POST", "/endpoints/a/b/async-invocations", nil, "s3"},
		{"bucket named endpoints, GET", "GET", "/endpoints/key", nil, "s3"},
		{"bucket named endpoints, GET invocations key", "GET", "/endpoints/my-ep/invocations", nil, "s3"},
		{"bucket named endpoints, PUT invocations key", "PUT", "/endpoints/my-ep/invocations", nil, "s3"},
		{"bucket named endpoints, PUT", "PUT", "/endpoints/key", nil, "s3"},
		{"bucket named endpoints, POST object", "POST", "/endpoints/key?uploads", nil, "s3"},
		{"bucket named endpoints, POST deeper key", "POST", "/endpoints/a/b/invocations", nil, "s3"},
		{"bucket named endpoints, POST empty name", "POST", "/endpoints//invocations", nil, "s3"},
		{"bucket named endpoints, POST bucket", "POST", "/endpoints", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "s3"},
		{"bucket named endpoints, POST delete", "POST", "/endpoints/?delete", nil, "s3"},
		{"list buckets", "GET", "/", nil, "s3"},
		{"put object", "PUT", "/bucket/a/b", nil, "s3"},
		{"metrics", "GET", "/_sagebox/metrics", nil, "metrics"},
		{"sts form post", "POST", "/", map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}, "query"},
		{"s3 delete objects", "POST", "/bucket", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "s3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			rt.ServeHTTP(w, req)
			if got := w.Body.String(); got != c.want {
				t.Errorf("routed to %q, want %q", got, c.want)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	var healthErr error
	rt := New(Routes{Health: func() error { return healthErr }}, denyAll{}, nil)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/_sagebox/health", nil))
	if w.Code != 200 {
		t.Fatalf("health = %d, want 200 even with auth on", w.Code)
	}
	healthErr = errors.New("disk full")
	w = httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/_sagebox/health", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "disk full") {
		t.Fatalf("unhealthy = %d %s", w.Code, w.Body)
	}
}

func TestAuthErrorsSpeakTheServiceProtocol(t *testing.T) {
	rt := New(Routes{JSON: named("json"), S3: named("s3")}, denyAll{}, nil)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/bucket/key", nil))
	if w.Code != 403 || !strings.Contains(w.Body.String(), "<Code>SignatureDoesNotMatch</Code>") {
		t.Errorf("S3 auth error = %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("HEAD", "/bucket/key", nil))
	if w.Code != 403 || w.Body.Len() != 0 {
		t.Errorf("HEAD auth error = %d with body %q, want bodyless 403", w.Code, w.Body)
	}
	req := httptest.NewRequest("POST", "/", nil)
	req.Header.Set("X-Amz-Target", "SageMaker.ListTrainingJobs")
	w = httptest.NewRecorder()
	rt.ServeHTTP(w, req)
	if w.Code != 403 || w.Header().Get("x-amzn-ErrorType") != "SignatureDoesNotMatch" || !strings.Contains(w.Body.String(), `"__type":"SignatureDoesNotMatch"`) {
		t.Errorf("JSON auth error = %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestUnknownSageboxRoute(t *testing.T) {
	rt := New(Routes{}, nil, nil)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("GET", "/_sagebox/nope", nil))
	if w.Code != 404 {
		t.Errorf("got %d", w.Code)
	}
}

// Endpoints are not served yet: InvokeEndpoint answers a JSON error that
// says so, while S3 calls into a bucket named "endpoints" still reach S3.
func TestRuntimeNotWiredAnswersClearly(t *testing.T) {
	rt := New(Routes{S3: named("s3")}, nil, nil)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("POST", "/endpoints/my-ep/invocations", strings.NewReader("{}")))
	if w.Code != http.StatusNotImplemented || !strings.Contains(w.Body.String(), "endpoints are not available") {
		t.Errorf("invoke with no runtime = %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest("POST", "/endpoints/my-ep?uploads", nil))
	if w.Body.String() != "s3" {
		t.Errorf("multipart upload into bucket endpoints routed to %q", w.Body)
	}
}

func TestServiceNames(t *testing.T) {
	for svc, want := range map[Service]string{ServiceS3: "s3", ServiceJSON: "json", ServiceRuntime: "runtime", ServiceSagebox: "sagebox", ServiceQuery: "query"} {
		if svc.String() != want {
			t.Errorf("%d.String() = %q, want %q", svc, svc.String(), want)
		}
	}
}
