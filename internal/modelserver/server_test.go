package modelserver

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestInvocationEcho(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	r := ts.invoke(t, `[[1,2,3]]`, "Accept", "text/csv", "X-Amzn-SageMaker-Custom-Attributes", "trace=1")
	if r.code != 200 || r.body != `[[1,2,3]]` {
		t.Fatalf("got %d %q", r.code, r.body)
	}
	checks := map[string]string{
		"Content-Type":                       "text/csv",
		"X-Request-Content-Type":             "application/json",
		"X-Amzn-Sagemaker-Custom-Attributes": "echo:trace=1",
		"X-Batch-Size":                       "1",
		"Content-Length":                     "9",
	}
	for k, want := range checks {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	// No Accept: the worker applies default_accept from LOAD.
	r = ts.invoke(t, `1`)
	if r.header.Get("X-Request-Accept") != "" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("accept %q, content type %q", r.header.Get("X-Request-Accept"), r.header.Get("Content-Type"))
	}
}

func TestRoutes(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	tests := []struct {
		method, path string
		code         int
		errType      string
	}{
		{"GET", "/ping", 200, ""},
		{"HEAD", "/ping", 200, ""},
		{"POST", "/ping", 405, TypeMethodNotAllowed},
		{"GET", "/invocations", 405, TypeMethodNotAllowed},
		{"POST", "/invocations", 200, ""},
		{"POST", "/models/model/invoke", 200, ""},
		{"GET", "/models/model/invoke", 405, TypeMethodNotAllowed},
		{"POST", "/models/other/invoke", 404, TypeNotFound},
		{"GET", "/nope", 404, TypeNotFound},
		{"POST", "/invocations/extra", 404, TypeNotFound},
		{"GET", "/_sagebox/metrics", 200, ""},
		{"GET", "/_sagebox/health", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := ts.do(t, tt.method, tt.path, "x")
			if r.code != tt.code {
				t.Fatalf("code %d, want %d (%s)", r.code, tt.code, r.body)
			}
			if tt.errType != "" {
				e := r.errorBody(t)
				if e.Type != tt.errType || e.Code != tt.code || e.Message == "" {
					t.Fatalf("error body %+v", e)
				}
				if r.header.Get("Content-Type") != "application/json" {
					t.Fatalf("content type %q", r.header.Get("Content-Type"))
				}
			}
			if tt.code == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
}

func TestPingBeforeAndAfterLoad(t *testing.T) {
	ts := startTestServer(t, testOptions{workers: 2, env: []string{"FAKE_LOAD_DELAY=400ms"}, noWait: true})
	r := ts.do(t, "GET", "/ping", "")
	if r.code != 503 || !strings.Contains(r.body, `"Unhealthy"`) {
		t.Fatalf("ping while loading: %d %s", r.code, r.body)
	}
	if ts.Ready() {
		t.Fatal("Ready while loading")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	r = ts.do(t, "GET", "/ping", "")
	if r.code != 200 || strings.TrimSpace(r.body) != `{"status":"Healthy"}` {
		t.Fatalf("ping after load: %d %s", r.code, r.body)
	}
	if n := len(ts.loads(t)); n != 2 {
		t.Fatalf("%d loads, want 2 (one per worker)", n)
	}
}

func TestPingBeforeStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ModelDir = t.TempDir()
	srv, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := serveTestHTTP(t, srv)
	defer h.Close()
	resp, err := http.Get(h.URL + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("ping before Start: %d", resp.StatusCode)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStatusPassThrough(t *testing.T) {
	for _, withTB := range []bool{false, true} {
		t.Run(fmt.Sprintf("traceback=%v", withTB), func(t *testing.T) {
			ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.IncludeTraceback = withTB }})
			for _, code := range []int{400, 406, 415, 500, 507} {
				r := ts.invoke(t, "status:"+strconv.Itoa(code))
				if r.code != code {
					t.Fatalf("code %d, want %d", r.code, code)
				}
				e := r.errorBody(t)
				if e.Code != code || e.Type != "TestError" || e.Message != "forced "+strconv.Itoa(code) {
					t.Fatalf("body %+v", e)
				}
				if (e.Traceback != "") != withTB {
					t.Fatalf("traceback %q with IncludeTraceback=%v", e.Traceback, withTB)
				}
			}
			if !strings.Contains(ts.logText(), "TestError: forced 500") {
				t.Error("traceback not logged")
			}
		})
	}
}

func TestPayloadLimit(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.MaxPayload = 100 }})
	tests := []struct {
		name    string
		size    int
		chunked bool
		code    int
	}{
		{"at limit", 100, false, 200},
		{"over limit", 101, false, 413},
		{"chunked at limit", 100, true, 200},
		{"chunked over limit", 5000, true, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(strings.Repeat("a", tt.size))
			if tt.chunked {
				body = io.MultiReader(body) // hides the length
			}
			req, _ := http.NewRequest("POST", ts.http.URL+"/invocations", body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("code %d, want %d: %s", resp.StatusCode, tt.code, b)
			}
			if tt.code == 413 && !strings.Contains(string(b), "exceeds the limit of 100 bytes") {
				t.Fatalf("413 body %s", b)
			}
		})
	}
}

// Clients such as urllib3 send the whole body before reading the answer.
// A body far over the limit must still get its 413, not a reset.
func TestPayloadLimitClientWritesFirst(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.MaxPayload = 1 << 20 }})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 8 << 20
	fmt.Fprintf(conn, "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", size)
	if _, err := conn.Write(make([]byte, size)); err != nil {
		t.Fatalf("writing the body: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !strings.Contains(string(b), "exceeds the limit of 1048576 bytes") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if r := ts.invoke(t, "ok"); r.code != 200 {
		t.Fatalf("server after oversize body: %d %s", r.code, r.body)
	}
}

// Requests the HTTP layer cannot read get a JSON error with the right
// status, and the server keeps serving.
func TestMalformedHTTP(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	addr := strings.TrimPrefix(ts.http.URL, "http://")
	tests := []struct {
		name string
		raw  string
		code int
	}{
		{"garbage", "GARBAGE\r\n\r\n", 400},
		{"bad content length", "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400},
		{"negative content length", "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400},
		{"bad chunk size", "POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400},
		{"headers too large", "GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(conn, tt.raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			var e Error
			if resp.StatusCode != tt.code || json.Unmarshal(b, &e) != nil || e.Code != tt.code || e.Message == "" {
				t.Fatalf("%d %s, want a JSON %d", resp.StatusCode, b, tt.code)
			}
		})
	}
	if r := ts.invoke(t, "ok"); r.code != 200 {
		t.Fatalf("server after malformed requests: %d %s", r.code, r.body)
	}
}

func TestQueueFull(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.QueueSize = 2 }})
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	// One request occupies the worker, two fill the queue.
	wg.Go(func() { codes <- ts.invoke(t, "sleep:500ms").code })
	eventually(t, "worker busy", func() bool { return ts.queue.Len() == 0 && ts.pending.Load() == 1 })
	for range 2 {
		wg.Go(func() { codes <- ts.invoke(t, "x").code })
	}
	eventually(t, "queue full", func() bool { return ts.queue.Len() == 2 })
	r := ts.invoke(t, "x")
	if r.code != 503 {
		t.Fatalf("code %d, want 503", r.code)
	}
	e := r.errorBody(t)
	if e.Type != TypeQueueFull || e.Message != "model queue is full (2 waiting); retry later or raise SAGEBOX_QUEUE_SIZE" {
		t.Fatalf("body %+v", e)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("queued request got %d", c)
		}
	}
}

func TestWorkerCrashFailsOnlyItsBatch(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{"crash", "exited with code 3"},
		{"oom", "SIGKILL (exit 137)"},
		{"sigterm", "killed by signal SIGTERM"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			ts := startTestServer(t, testOptions{workers: 2})
			// A request on the other worker keeps going while one crashes.
			slow := make(chan response, 1)
			go func() { slow <- ts.invoke(t, "sleep:300ms") }()
			eventually(t, "slow request taken", func() bool { return ts.queue.Len() == 0 && ts.pending.Load() == 1 })
			r := ts.invoke(t, tt.body)
			if r.code != 502 {
				t.Fatalf("code %d, want 502: %s", r.code, r.body)
			}
			e := r.errorBody(t)
			if e.Type != TypeWorkerDied || !strings.Contains(e.Message, tt.want) || !strings.Contains(e.Message, "being restarted") {
				t.Fatalf("message %q, want it to contain %q", e.Message, tt.want)
			}
			if tt.body == "crash" && !strings.Contains(e.Message, "boom") {
				t.Fatalf("message %q lacks the stderr tail", e.Message)
			}
			if s := <-slow; s.code != 200 {
				t.Fatalf("request on the healthy worker got %d: %s", s.code, s.body)
			}
			eventually(t, "restart", func() bool { return ts.Ready() && len(ts.loads(t)) == 3 })
			for range 4 {
				if r := ts.invoke(t, "ok"); r.code != 200 {
					t.Fatalf("after restart: %d %s", r.code, r.body)
				}
			}
			h := ts.Health()
			if h.Workers[0].Restarts+h.Workers[1].Restarts != 1 {
				t.Fatalf("restarts %+v", h.Workers)
			}
		})
	}
}

func TestWorkerTimeout(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.RequestTimeout = 300 * time.Millisecond }})
	start := time.Now()
	r := ts.invoke(t, "hang")
	if r.code != 504 {
		t.Fatalf("code %d, want 504: %s", r.code, r.body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	e := r.errorBody(t)
	if e.Message != "worker 0 timed out after 300ms (SAGEMAKER_MODEL_SERVER_TIMEOUT); it was killed and is being restarted" {
		t.Fatalf("message %q", e.Message)
	}
	if r := ts.invoke(t, "ok"); r.code != 200 {
		t.Fatalf("after restart: %d %s", r.code, r.body)
	}
}

func TestWorkerDiesWhileIdle(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	pid := ts.Health().Workers[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restart", func() bool {
		h := ts.Health()
		return h.Ready && h.Workers[0].PID != pid
	})
	if r := ts.invoke(t, "ok"); r.code != 200 {
		t.Fatalf("after idle death: %d %s", r.code, r.body)
	}
}

func TestLoadFailure(t *testing.T) {
	// The backoff is recorded rather than slept: five restarts, then the
	// worker waits until the server stops.
	var mu sync.Mutex
	var delays []time.Duration
	recordBackoff := func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		delays = append(delays, d)
		n := len(delays)
		mu.Unlock()
		if n < 5 {
			return ctx.Err() == nil
		}
		<-ctx.Done()
		return false
	}
	ts := startTestServer(t, testOptions{env: []string{"FAKE_LOAD=fail"}, noWait: true,
		mutate: func(c *Config) {
			c.RestartBackoff = 50 * time.Millisecond
			c.RestartBackoffMax = 200 * time.Millisecond
			c.restartWait = recordBackoff
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := ts.WaitReady(ctx)
	if err == nil || !strings.Contains(err.Error(), "FileNotFoundError: model.pt not found") {
		t.Fatalf("WaitReady = %v", err)
	}
	r := ts.do(t, "GET", "/ping", "")
	if r.code != 500 || !strings.Contains(r.body, "model.pt not found") {
		t.Fatalf("ping: %d %s", r.code, r.body)
	}
	r = ts.invoke(t, "x")
	if r.code != 503 || !strings.Contains(r.body, "model.pt not found") {
		t.Fatalf("invoke: %d %s", r.code, r.body)
	}
	// The first restart is immediate, then the delay doubles up to the
	// maximum; the fifth wait lasts until the server stops, so five loads.
	eventually(t, "five restarts", func() bool { mu.Lock(); defer mu.Unlock(); return len(delays) == 5 })
	eventually(t, "five load attempts", func() bool { return len(ts.loads(t)) == 5 })
	ms := time.Millisecond
	mu.Lock()
	got := slices.Clone(delays)
	mu.Unlock()
	if want := []time.Duration{0, 50 * ms, 100 * ms, 200 * ms, 200 * ms}; !slices.Equal(got, want) {
		t.Fatalf("restart delays %v, want %v", got, want)
	}
	if !strings.Contains(ts.logText(), "Traceback (most recent call last)") {
		t.Error("load traceback not logged")
	}
}

func TestLoadRecoversAfterFailures(t *testing.T) {
	ts := startTestServer(t, testOptions{env: []string{"FAKE_LOAD_FAIL_UNTIL=3"}, noWait: true})
	eventually(t, "ready", ts.Ready)
	if n := len(ts.loads(t)); n != 3 {
		t.Fatalf("%d loads, want 3", n)
	}
	if r := ts.do(t, "GET", "/ping", ""); r.code != 200 {
		t.Fatalf("ping %d", r.code)
	}
}

func TestStartupFailures(t *testing.T) {
	tests := []struct {
		name string
		env  string
		want string
	}{
		{"exit before connecting", "FAKE_LOAD=exit", "exited with code 1 while connecting; last stderr lines:\nImportError: No module named 'inference'"},
		{"crash while loading", "FAKE_LOAD=crash", "exited with code 4 while loading the model; last stderr lines:\nSegmentation fault in model_fn"},
		{"startup timeout", "FAKE_LOAD=hang", "did not finish loading the model within the startup timeout of 2s (SAGEMAKER_STARTUP_TIMEOUT)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Long enough for a worker (this test binary, perhaps built
			// with -race, on a busy machine) to connect before it hangs.
			ts := startTestServer(t, testOptions{env: []string{tt.env}, noWait: true,
				mutate: func(c *Config) { c.StartupTimeout = 2 * time.Second }})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := ts.WaitReady(ctx)
			var le *LoadError
			if !errors.As(err, &le) || le.Worker != 0 || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WaitReady = %v\nwant a *LoadError containing %q", err, tt.want)
			}
		})
	}
}

func TestBatchArrivesAsOneFrame(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) {
		c.BatchSize = 4
		c.MaxBatchDelay = 2 * time.Second
	}})
	var wg sync.WaitGroup
	results := make(chan response, 4)
	for i := range 4 {
		wg.Go(func() { results <- ts.invoke(t, "req"+strconv.Itoa(i)) })
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.code != 200 || r.header.Get("X-Batch-Size") != "4" {
			t.Fatalf("got %d batch size %q", r.code, r.header.Get("X-Batch-Size"))
		}
	}
	b, _ := os.ReadFile(filepath.Join(ts.state, "batches.log"))
	if strings.TrimSpace(string(b)) != "4" {
		t.Fatalf("batches.log = %q, want one batch of 4", b)
	}
	// A lone request waits for the delay, then goes alone.
	start := time.Now()
	ts.invoke(t, "alone")
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("lone request returned after %s, before the batch delay", d)
	}
}

func TestBatchMixedOutcomes(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) {
		c.BatchSize = 3
		c.MaxBatchDelay = 2 * time.Second
	}})
	bodies := []string{"ok", "status:415", "ok2"}
	want := map[string]int{"ok": 200, "status:415": 415, "ok2": 200}
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Go(func() {
			if r := ts.invoke(t, b); r.code != want[b] {
				t.Errorf("%s: code %d", b, r.code)
			}
		})
	}
	wg.Wait()
}

func TestConcurrentRequestsOverWorkers(t *testing.T) {
	ts := startTestServer(t, testOptions{workers: 3, mutate: func(c *Config) { c.QueueSize = 200 }})
	var mu sync.Mutex
	pids := map[string]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			body := "sleep:5ms"
			if i%2 == 0 {
				body = fmt.Sprintf("payload-%d", i)
			}
			r := ts.invoke(t, body)
			if r.code != 200 || r.body != body {
				t.Errorf("request %d: %d %q", i, r.code, r.body)
				return
			}
			mu.Lock()
			pids[r.header.Get("X-Worker-Pid")]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) < 2 {
		t.Fatalf("all requests went to %v; want several workers", pids)
	}
}

func TestDrainOnShutdown(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Go(func() { codes <- ts.invoke(t, "sleep:200ms").code })
	}
	// One request in the worker, two queued.
	eventually(t, "requests accepted", func() bool { return ts.pending.Load() == 3 && ts.queue.Len() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(ctx) }()
	eventually(t, "stopping", func() bool { return ts.Health().Phase == PhaseStopping })
	if r := ts.invoke(t, "late"); r.code != 503 || !strings.Contains(r.body, "shutting down") {
		t.Fatalf("request during shutdown: %d %s", r.code, r.body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("in-flight request got %d during drain", c)
		}
	}
	if r := ts.do(t, "GET", "/ping", ""); r.code != 503 {
		t.Fatalf("ping after shutdown: %d", r.code)
	}
	ts.checkReaped(t)
}

func TestShutdownGraceExpires(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	got := make(chan response, 2)
	go func() { got <- ts.invoke(t, "hang") }()
	eventually(t, "hang in worker", func() bool { return ts.pending.Load() == 1 && ts.queue.Len() == 0 })
	go func() { got <- ts.invoke(t, "queued") }()
	eventually(t, "queued", func() bool { return ts.queue.Len() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
	for range 2 {
		r := <-got
		if r.code != 503 || !strings.Contains(r.body, "shut down") {
			t.Fatalf("unanswered request: %d %s", r.code, r.body)
		}
	}
}

// A client that hangs up while its request waits for a worker: once the
// request has waited abandonCheckAfter, the worker that takes it sees the
// closed connection and drops it without running it, and a client still
// waiting behind it is served.
func TestClientGoneBeforeAWorkerTookItIsDropped(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	gate := filepath.Join(t.TempDir(), "go")
	busy := make(chan response, 1)
	go func() { busy <- ts.invoke(t, "wait:"+gate) }()
	eventually(t, "worker busy", func() bool { return ts.pending.Load() == 1 && ts.queue.Len() == 0 })

	client, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := io.WriteString(client, "POST /invocations HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\ngone"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "queued", func() bool { return ts.queue.Len() == 1 })
	queuedBy := time.Now()
	kept := make(chan response, 1)
	go func() { kept <- ts.invoke(t, "kept") }()
	eventually(t, "both queued", func() bool { return ts.queue.Len() == 2 })

	// Hang up, and let the worker go only once the server's end of the
	// connection sees it and the request has waited long enough to be
	// checked.
	client.Close()
	eventually(t, "the hang-up reached the server", func() bool {
		sc, ok := ts.http.serverConn(client.LocalAddr().String()).(syscall.Conn)
		return ok && clientGone(sc)
	})
	time.Sleep(time.Until(queuedBy.Add(abandonCheckAfter)))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if r := <-busy; r.code != 200 {
		t.Fatalf("busy request: %d %s", r.code, r.body)
	}
	if r := <-kept; r.code != 200 || r.body != "kept" {
		t.Fatalf("request of a client that stayed: %d %s", r.code, r.body)
	}
	// Queued first, the abandoned request would have run before "kept".
	b, _ := os.ReadFile(filepath.Join(ts.state, "batches.log"))
	if n := strings.Count(string(b), "\n"); n != 2 {
		t.Errorf("the worker ran %d batches, want 2 (the abandoned request must not reach it)", n)
	}
	// The drop is logged after the request leaves the queue and pending.
	eventually(t, "the drop logged", func() bool {
		return strings.Contains(ts.logText(), "the client closed the connection after waiting")
	})
	eventually(t, "nothing pending", func() bool { return ts.pending.Load() == 0 && ts.queue.Len() == 0 })
	if r := ts.invoke(t, "after"); r.code != 200 {
		t.Fatalf("next request: %d %s", r.code, r.body)
	}
}

func TestGPUAssignmentAndWorkerEnv(t *testing.T) {
	tests := []struct {
		gpus int
		want []int
	}{
		{0, []int{-1, -1, -1}},
		{2, []int{0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d GPUs", tt.gpus), func(t *testing.T) {
			ts := startTestServer(t, testOptions{workers: 3, mutate: func(c *Config) {
				c.GPUs = tt.gpus
				c.Program = "serve.py"
				c.DefaultAccept = "text/csv"
			}})
			got := make([]int, 3)
			for _, r := range ts.loads(t) {
				got[r.Load.WorkerID] = r.Load.GPUID
				if r.Cwd != ts.modelDir || r.Load.ModelDir != ts.modelDir {
					t.Errorf("cwd %s, model_dir %s; want %s", r.Cwd, r.Load.ModelDir, ts.modelDir)
				}
				wantPP := ts.cfg.RuntimeDir + ":" + filepath.Join(ts.modelDir, "code") + ":/existing"
				if r.PythonPath != wantPP {
					t.Errorf("PYTHONPATH %q, want %q", r.PythonPath, wantPP)
				}
				if r.Secret != "" {
					t.Errorf("the worker sees SAGEBOX_CREDENTIALS=%q", r.Secret)
				}
				if !slices.Equal(r.Args[:4], []string{"-m", "sagebox_runtime", "worker", "--socket"}) {
					t.Errorf("args %q", r.Args)
				}
				if r.Load.Program != "serve.py" || r.Load.DefaultAccept != "text/csv" || r.Load.ServerName != "sagebox" || r.Load.BatchSize != 1 {
					t.Errorf("LOAD %+v", r.Load)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("gpu ids %v, want %v", got, tt.want)
			}
		})
	}
}

func TestModelData(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, "model.tar.gz")
	writeTarGz(t, tarball, map[string]string{"model.pt": "weights", "code/inference.py": "# user code\n"})
	ts := startTestServer(t, testOptions{mutate: func(c *Config) {
		c.ModelDir = ""
		c.ModelData = tarball
	}})
	b, err := os.ReadFile(filepath.Join(ts.modelDir, "model.pt"))
	if err != nil || string(b) != "weights" {
		t.Fatalf("extracted model.pt: %q, %v", b, err)
	}
	if ts.loads(t)[0].Load.ModelDir != ts.modelDir {
		t.Fatal("LOAD does not name the extracted dir")
	}
	if err := ts.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ts.modelDir); !os.IsNotExist(err) {
		t.Fatalf("extracted model dir left behind: %v", err)
	}
}

func writeTarGz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	ts.invoke(t, "ok")
	ts.invoke(t, "status:415")
	r := ts.do(t, "GET", "/_sagebox/metrics", "")
	for _, want := range []string{
		`sagebox_model_requests_total{code="200"} 1`,
		`sagebox_model_requests_total{code="415"} 1`,
		`sagebox_model_batch_size_count 2`,
		`sagebox_model_queue_seconds_count 2`,
		`sagebox_model_worker_seconds_count 2`,
		`sagebox_model_handler_seconds_count 2`,
		`sagebox_model_queue_depth 0`,
		`sagebox_model_workers_loaded 1`,
		`sagebox_model_worker_restarts_total 0`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no model", func(c *Config) { c.ModelDir = "" }, "model directory or a model.tar.gz is required"},
		{"both", func(c *Config) { c.ModelData = "m.tar.gz" }, "not both"},
		{"negative workers", func(c *Config) { c.Workers = -1 }, "workers must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ModelDir = "/m"
			tt.mutate(&cfg)
			if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want %q", err, tt.want)
			}
		})
	}
}
