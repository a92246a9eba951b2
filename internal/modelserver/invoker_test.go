package modelserver

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sagebox/sagebox/internal/wire"
)

// stubInvoker answers by the request body, standing in for a chain of
// containers behind the same routes.
type stubInvoker struct {
	mu     sync.Mutex
	health Health
	seen   chan Request
}

func (s *stubInvoker) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

func (s *stubInvoker) Invoke(ctx context.Context, req *Request, resp *Response) error {
	cp := *req
	cp.Body = append([]byte(nil), req.Body...)
	cp.Headers = append([]wire.Header(nil), req.Headers...)
	s.seen <- cp
	switch string(req.Body) {
	case "fail":
		return errorf(http.StatusFailedDependency, "StageFailed", "stage 2 of 3 failed")
	case "own-status":
		*resp = Response{Status: 418, ContentType: "text/plain", Body: []byte("teapot"),
			Err: errorf(418, TypeResponseStatus, "the handler said 418")}
		return nil
	}
	*resp = Response{Status: 200, ContentType: "text/csv", Body: []byte("chained:" + string(req.Body)),
		Headers: []wire.Header{{Name: "X-Stage", Value: "last"}, {Name: "Content-Length", Value: "1"}}}
	return nil
}

// The HTTP routes serve any Invoker: /invocations, /ping and the health
// route go through the interface, not through a *Server.
func TestRoutesServeAnyInvoker(t *testing.T) {
	inv := &stubInvoker{health: Health{Ready: true, Phase: PhaseRunning}, seen: make(chan Request, 4)}
	var logs lockedBuffer
	m := newMetrics(func() float64 { return 0 }, func() float64 { return 1 }, 1)
	hs := newHTTPServer(inv, routeOptions{logger: slog.New(slog.NewTextHandler(&logs, nil)), metrics: m, maxPayload: 1 << 20}, log.New(io.Discard, "", 0))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Shutdown(context.Background())
	url := "http://" + ln.Addr().String()

	post := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/invocations", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/csv")
		req.Header.Set("X-Amzn-SageMaker-Custom-Attributes", "a=1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := post("x")
	if resp.StatusCode != 200 || body != "chained:x" || resp.Header.Get("X-Stage") != "last" || resp.Header.Get("Content-Type") != "text/csv" {
		t.Fatalf("invocations: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	got := <-inv.seen
	if got.ContentType != "application/json" || got.Accept != "text/csv" || got.Conn == nil {
		t.Errorf("request as the Invoker saw it: %+v", got)
	}
	found := false
	for _, h := range got.Headers {
		found = found || (h.Name == "X-Amzn-Sagemaker-Custom-Attributes" && h.Value == "a=1")
	}
	if !found {
		t.Errorf("headers the Invoker saw: %+v", got.Headers)
	}
	resp, body = post("fail")
	if resp.StatusCode != http.StatusFailedDependency || !strings.Contains(body, `"type":"StageFailed"`) {
		t.Errorf("failed invocation: %d %s", resp.StatusCode, body)
	}
	resp, body = post("own-status")
	if resp.StatusCode != 418 || body != "teapot" || !strings.Contains(logs.String(), "the handler said 418") {
		t.Errorf("the handler's own status: %d %q, log %s", resp.StatusCode, body, logs.String())
	}
	for range 2 {
		<-inv.seen
	}

	ping := func() int {
		r, err := http.Get(url + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	if c := ping(); c != 200 {
		t.Errorf("ping of a ready invoker: %d", c)
	}
	inv.mu.Lock()
	inv.health = Health{Phase: PhaseRunning, Message: "loading"}
	inv.mu.Unlock()
	if c := ping(); c != 503 {
		t.Errorf("ping of an invoker that is not ready: %d", c)
	}
	r, err := http.Get(url + "/_sagebox/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `"message":"loading"`) {
		t.Errorf("health route: %s", b)
	}
}

// Server.Invoke is usable without HTTP (as a chain's stage would call it):
// it answers, and a caller's context that ends while the request still
// waits for a worker takes it out of the queue.
func TestServerInvokeDirect(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	var resp Response
	if err := ts.Invoke(context.Background(), &Request{Body: []byte("direct"), ContentType: "text/plain"}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != "direct" {
		t.Fatalf("direct invoke: %+v", resp)
	}

	busy := make(chan error, 1)
	go func() {
		var r Response
		busy <- ts.Invoke(context.Background(), &Request{Body: []byte("sleep:300ms")}, &r)
	}()
	eventually(t, "worker busy", func() bool { return ts.pending.Load() == 1 && ts.queue.Len() == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		var r Response
		gaveUp <- ts.Invoke(ctx, &Request{Body: []byte("never run")}, &r)
	}()
	eventually(t, "queued", func() bool { return ts.queue.Len() == 1 })
	cancel()
	err := <-gaveUp
	var e *Error
	if !errors.As(err, &e) || e.Code != StatusClientClosedRequest || !strings.Contains(e.Message, "gave up") {
		t.Fatalf("Invoke with its context cancelled: %v", err)
	}
	if n := ts.queue.Len(); n != 0 {
		t.Errorf("%d requests still queued after the caller gave up", n)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
}
