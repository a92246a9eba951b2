package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testHTTP is a Server's HTTPServer on a loopback port.
type testHTTP struct {
	URL   string
	srv   *HTTPServer
	conns *sync.Map // the client's address → the server's end of its connection
}

// serveTestHTTP serves srv's routes on a loopback port until Close.
func serveTestHTTP(t *testing.T, srv *Server) *testHTTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(log.New(io.Discard, "", 0))
	h := &testHTTP{URL: "http://" + ln.Addr().String(), srv: hs, conns: &sync.Map{}}
	go hs.Serve(recordingListener{ln, h.conns})
	return h
}

// serverConn returns the server's end of the connection from the client
// address client, or nil if it was not accepted.
func (h *testHTTP) serverConn(client string) net.Conn {
	c, ok := h.conns.Load(client)
	if !ok {
		return nil
	}
	return c.(net.Conn)
}

// recordingListener records every connection it accepts by the client's
// address.
type recordingListener struct {
	net.Listener
	conns *sync.Map
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Store(c.RemoteAddr().String(), c)
	}
	return c, err
}

func (h *testHTTP) Close() { h.srv.Shutdown(context.Background()) }

// testServer is a Server with fake workers behind a loopback HTTP server.
type testServer struct {
	*Server
	http  *testHTTP
	state string // FAKE_STATE_DIR
	logs  *lockedBuffer
}

type testOptions struct {
	workers int
	env     []string
	mutate  func(*Config)
	noWait  bool // do not wait for the model to load
}

func startTestServer(t *testing.T, o testOptions) *testServer {
	t.Helper()
	state := t.TempDir()
	modelDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(modelDir, "code"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ModelDir = modelDir
	cfg.Python = os.Args[0]
	cfg.Supervisor = testSupervisor()
	cfg.RuntimeDir = filepath.Join(state, "runtime")
	cfg.CacheDir = t.TempDir()
	cfg.GPUs = 0
	cfg.Workers = max(o.workers, 1)
	cfg.StartupTimeout = 10 * time.Second
	cfg.RequestTimeout = 10 * time.Second
	cfg.MaxBatchDelay = 0
	cfg.RestartBackoff = 10 * time.Millisecond
	cfg.RestartBackoffMax = 100 * time.Millisecond
	cfg.ShutdownGrace = 2 * time.Second
	cfg.Env = append(os.Environ(), "FAKE_SAGEBOX_WORKER=1", "FAKE_STATE_DIR="+state, "PYTHONPATH=/existing",
		"SAGEBOX_CREDENTIALS=AKID:server-secret")
	cfg.Env = append(cfg.Env, o.env...)
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, http: serveTestHTTP(t, srv), state: state, logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		ts.http.Close()
		ts.checkReaped(t)
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logText())
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !o.noWait {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.WaitReady(ctx); err != nil {
			t.Fatalf("WaitReady: %v\n%s", err, ts.logText())
		}
	}
	return ts
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (ts *testServer) logText() string { return ts.logs.String() }

// loads returns the LOAD records the fake workers wrote.
func (ts *testServer) loads(t *testing.T) []loadRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ts.state, "load-*.json"))
	var out []loadRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r loadRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// checkReaped fails if a worker process or a server goroutine outlived
// Shutdown.
func (ts *testServer) checkReaped(t *testing.T) {
	t.Helper()
	for _, r := range ts.loads(t) {
		if err := syscall.Kill(r.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("worker pid %d still exists after Shutdown (kill 0: %v)", r.PID, err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		leaked := strings.Contains(stacks, "modelserver.(*worker)") || strings.Contains(stacks, "modelserver.startProcess")
		if !leaked {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("worker goroutines still running after Shutdown:\n%s", stacks)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// response is an HTTP response with its body read.
type response struct {
	code   int
	header http.Header
	body   string
}

func (r response) errorBody(t *testing.T) Error {
	t.Helper()
	var e Error
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	return e
}

func (ts *testServer) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, ts.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (ts *testServer) invoke(t *testing.T, body string, headers ...string) response {
	t.Helper()
	return ts.do(t, http.MethodPost, "/invocations", body, append([]string{"Content-Type", "application/json"}, headers...)...)
}

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processExists reports whether pid is still a process (zombies included).
func processExists(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// testSupervisor is Config.Supervisor in the tests: this test binary,
// whose TestMain runs proc.RunSupervisor.
func testSupervisor() []string { return []string{os.Args[0], "exec-shim"} }
