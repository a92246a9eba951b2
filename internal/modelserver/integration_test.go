package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the real Python worker (python/sagebox_runtime, unpacked
// from the embedded copy exactly as in production) with Debian's
// /usr/bin/python3 and torch on a TorchScript model generated here.

const systemPython = "/usr/bin/python3"

// requireTorch skips the test when /usr/bin/python3 cannot import torch,
// unless SAGEBOX_STRICT_TOOLS=1, which turns the skip into a failure.
func requireTorch(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Python workers; skipped with -short")
	}
	out, err := exec.Command(systemPython, "-c", "import torch").CombinedOutput()
	if err == nil {
		return
	}
	msg := "needs " + systemPython + " with torch: " + strings.TrimSpace(string(out)) + " " + err.Error()
	if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// The model's output row i is [2 × sum(x[i]), rows in this forward call],
// so every answer tells how many requests shared its forward pass.
const makeModel = `
import sys, torch
class M(torch.nn.Module):
    def forward(self, x):
        n = torch.full((x.shape[0], 1), float(x.shape[0]))
        return torch.cat([x.sum(dim=1, keepdim=True) * 2, n], dim=1)
torch.jit.script(M()).save(sys.argv[1])
`

// pyModelDir writes model.pt and, when code is not empty, code/inference.py.
func pyModelDir(t *testing.T, code string) string {
	t.Helper()
	dir := t.TempDir()
	// torch.jit.script reads the class's source, so the script is a file.
	script := filepath.Join(t.TempDir(), "make_model.py")
	if err := os.WriteFile(script, []byte(makeModel), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(systemPython, script, filepath.Join(dir, "model.pt")).CombinedOutput(); err != nil {
		t.Fatalf("make model: %v\n%s", err, out)
	}
	if code != "" {
		if err := os.MkdirAll(filepath.Join(dir, "code"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "code", "inference.py"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startPyServer serves modelDir with real Python workers.
func startPyServer(t *testing.T, modelDir string, wait bool, mutate func(*Config)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ModelDir = modelDir
	cfg.Python = systemPython
	cfg.Supervisor = testSupervisor()
	cfg.CacheDir = t.TempDir()
	cfg.GPUs = 0
	cfg.Workers = 1
	cfg.StartupTimeout = 60 * time.Second
	cfg.RequestTimeout = 30 * time.Second
	cfg.RestartBackoff = 50 * time.Millisecond
	cfg.ShutdownGrace = 5 * time.Second
	cfg.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &lockedBuffer{}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, http: serveTestHTTP(t, srv), state: t.TempDir(), logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		pids := ts.pids()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		ts.http.Close()
		for _, pid := range pids {
			if processExists(pid) {
				t.Errorf("worker pid %d outlived Shutdown", pid)
			}
		}
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logText())
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wait {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := srv.WaitReady(ctx); err != nil {
			t.Fatalf("WaitReady: %v\n%s", err, ts.logText())
		}
	}
	return ts
}

// waitRestarted waits until worker 0 runs a process other than pid and
// has loaded the model.
func (ts *testServer) waitRestarted(t *testing.T, pid int) {
	t.Helper()
	eventually(t, "worker restart", func() bool {
		w := ts.Health().Workers[0]
		return w.PID != pid && w.State == WorkerLoaded
	})
}

func (ts *testServer) pids() []int {
	var out []int
	for _, w := range ts.Health().Workers {
		if w.PID != 0 {
			out = append(out, w.PID)
		}
	}
	return out
}

func TestPythonDefaultHandlers(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, ""), true, nil)
	tests := []struct {
		name, body, contentType, accept string
		code                            int
		wantType, wantBody              string
	}{
		{"json", "[[1, 2, 3]]", "application/json", "", 200, "application/json", "[[12.0, 1.0]]"},
		{"json charset", "[[1, 1]]", "application/json; charset=utf-8", "application/json", 200, "application/json", "[[4.0, 1.0]]"},
		{"csv", "1,2\n3,4\n", "text/csv", "text/csv", 200, "text/csv", "6.0,2.0\n14.0,2.0"},
		{"unsupported content type", "x", "image/png", "", 415, "application/json", ""},
		{"unsupported accept", "[[1]]", "application/json", "image/png", 406, "application/json", ""},
		{"bad json", "[[1,", "application/json", "", 400, "application/json", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdrs := []string{"Content-Type", tt.contentType}
			if tt.accept != "" {
				hdrs = append(hdrs, "Accept", tt.accept)
			}
			r := ts.do(t, "POST", "/invocations", tt.body, hdrs...)
			if r.code != tt.code {
				t.Fatalf("code %d, want %d: %s", r.code, tt.code, r.body)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Fatalf("content type %q, want %q", ct, tt.wantType)
			}
			if tt.code >= 400 {
				if e := r.errorBody(t); e.Code != tt.code || e.Message == "" {
					t.Fatalf("error body %+v", e)
				}
				return
			}
			if got := strings.TrimSpace(r.body); got != tt.wantBody && !jsonEqual(got, tt.wantBody) {
				t.Fatalf("body %q, want %q", got, tt.wantBody)
			}
		})
	}
	if r := ts.do(t, "GET", "/ping", ""); r.code != 200 {
		t.Fatalf("ping %d", r.code)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

const customInference = `
import json, os, time

def model_fn(model_dir):
    return {"scale": 3}

def input_fn(input_data, content_type, context):
    attrs = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")
    return json.loads(input_data), attrs

def predict_fn(data, model):
    value, attrs = data
    if value == "die":
        os._exit(7)
    if value == "hang":
        time.sleep(600)
    if value == "busy":
        time.sleep(0.3)
        value = 0
    if value == "raise":
        raise ValueError("cannot predict on raise")
    return {"y": value * model["scale"], "attrs": attrs}

def output_fn(prediction, accept, context):
    context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "seen=" + str(prediction["attrs"]))
    return json.dumps({"y": prediction["y"]}), "application/vnd.sagebox+json"
`

func TestPythonCustomInference(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, customInference), true, func(c *Config) { c.IncludeTraceback = true })
	r := ts.invoke(t, "5", "X-Amzn-SageMaker-Custom-Attributes", "k=v")
	if r.code != 200 || !jsonEqual(r.body, `{"y": 15}`) {
		t.Fatalf("got %d %s", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/vnd.sagebox+json" {
		t.Fatalf("content type %q", ct)
	}
	if a := r.header.Get("X-Amzn-SageMaker-Custom-Attributes"); a != "seen=k=v" {
		t.Fatalf("custom attributes %q", a)
	}
	r = ts.invoke(t, `"raise"`)
	if r.code != 500 {
		t.Fatalf("raise: %d %s", r.code, r.body)
	}
	e := r.errorBody(t)
	if e.Type != "ValueError" || !strings.Contains(e.Message, "cannot predict on raise") || !strings.Contains(e.Traceback, "predict_fn") {
		t.Fatalf("error %+v", e)
	}
}

func TestPythonWorkerExits(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, customInference), true, nil)
	pid := ts.pids()[0]
	r := ts.invoke(t, `"die"`)
	if r.code != 502 {
		t.Fatalf("die: %d %s", r.code, r.body)
	}
	if e := r.errorBody(t); !strings.Contains(e.Message, "exited with code 7 while handling this request") {
		t.Fatalf("message %q", e.Message)
	}
	ts.waitRestarted(t, pid)
	if r := ts.invoke(t, "2"); r.code != 200 || !jsonEqual(r.body, `{"y": 6}`) {
		t.Fatalf("after restart: %d %s", r.code, r.body)
	}
}

// The real worker holds quick answers back while the next request is
// already waiting (worker.py). When it dies on one of the requests it took
// together, that one fails; the others, the one answered but held back
// included, are answered by the restarted worker.
func TestPythonPipelinedCrashFailsOnlyItsRequest(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, customInference), true, takeSlowTogether)
	rs := queueBehind(t, ts, `"busy"`, []string{"1", `"die"`, "2"})
	if rs[0].code != 200 || !jsonEqual(rs[0].body, `{"y": 3}`) {
		t.Errorf("the request before the crash: %d %s", rs[0].code, rs[0].body)
	}
	if rs[1].code != 502 || !strings.Contains(rs[1].body, "exited with code 7 while handling this request") {
		t.Errorf("the request that crashed the worker: %d %s", rs[1].code, rs[1].body)
	}
	if rs[2].code != 200 || !jsonEqual(rs[2].body, `{"y": 6}`) {
		t.Errorf("the request after the crash: %d %s", rs[2].code, rs[2].body)
	}
}

func TestPythonHangingHandler(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, customInference), true, func(c *Config) { c.RequestTimeout = 2 * time.Second })
	pid := ts.pids()[0]
	r := ts.invoke(t, `"hang"`)
	if r.code != 504 || !strings.Contains(r.body, "timed out after 2s") {
		t.Fatalf("hang: %d %s", r.code, r.body)
	}
	ts.waitRestarted(t, pid)
	if r := ts.invoke(t, "1"); r.code != 200 {
		t.Fatalf("after restart: %d %s", r.code, r.body)
	}
}

func TestPythonBatchingOneForwardPass(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, ""), true, func(c *Config) {
		c.BatchSize = 4
		c.MaxBatchDelay = 3 * time.Second
	})
	var wg sync.WaitGroup
	bodies := make([]string, 4)
	for i := range 4 {
		wg.Go(func() {
			r := ts.invoke(t, "[[1, 2]]")
			if r.code != 200 {
				t.Errorf("request %d: %d %s", i, r.code, r.body)
			}
			bodies[i] = r.body
		})
	}
	wg.Wait()
	// Each answer is [[6.0, rows in the forward pass]]: 4 means all four
	// requests went through the model in one call.
	for i, b := range bodies {
		if !jsonEqual(b, "[[6.0, 4.0]]") {
			t.Fatalf("answer %d = %s, want [[6.0, 4.0]] (one forward pass over 4 rows)", i, b)
		}
	}
}

func TestPythonModelFnFails(t *testing.T) {
	requireTorch(t)
	code := "def model_fn(model_dir):\n    raise FileNotFoundError('weights.bin is missing from ' + model_dir)\n"
	ts := startPyServer(t, pyModelDir(t, code), false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := ts.WaitReady(ctx)
	var le *LoadError
	if !errors.As(err, &le) || le.Type != "FileNotFoundError" || !strings.Contains(le.Message, "weights.bin is missing") ||
		!strings.Contains(le.Traceback, "model_fn") {
		t.Fatalf("WaitReady = %#v", err)
	}
	if r := ts.do(t, "GET", "/ping", ""); r.code != 500 || !strings.Contains(r.body, "weights.bin is missing") {
		t.Fatalf("ping: %d %s", r.code, r.body)
	}
	// A parent polling over a socket reads model_fn's error from the
	// health route's message.
	var h Health
	r := ts.do(t, "GET", pathHealth, "")
	if err := json.Unmarshal([]byte(r.body), &h); err != nil || h.Ready ||
		!strings.Contains(h.Message, "FileNotFoundError: weights.bin is missing from") {
		t.Fatalf("health: %d %s", r.code, r.body)
	}
}

// A status a handler sets through the context is its answer: the body,
// content type and headers it wrote reach the client with it.
func TestPythonHandlerStatusKeepsItsBody(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, `
import json

def model_fn(model_dir):
    return None

def transform_fn(model, data, content_type, accept, context):
    key = json.loads(data)
    context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "key=" + str(key))
    if key != "known":
        context.set_response_status(404)
        if key == "silent":
            return b""
        return json.dumps({"error": "no such key", "key": key}), "application/problem+json"
    return json.dumps({"value": 1})
`), true, nil)
	r := ts.invoke(t, `"missing"`)
	if r.code != 404 || !jsonEqual(r.body, `{"error": "no such key", "key": "missing"}`) {
		t.Fatalf("404 from the handler: %d %s", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q", ct)
	}
	if a := r.header.Get("X-Amzn-SageMaker-Custom-Attributes"); a != "key=missing" {
		t.Errorf("custom attributes %q", a)
	}
	r = ts.invoke(t, `"silent"`)
	if r.code != 404 || r.errorBody(t).Type != TypeResponseStatus || r.header.Get("X-Amzn-SageMaker-Custom-Attributes") != "key=silent" {
		t.Fatalf("404 without a body: %d %s %v", r.code, r.body, r.header)
	}
	if r := ts.invoke(t, `"known"`); r.code != 200 || !jsonEqual(r.body, `{"value": 1}`) {
		t.Fatalf("known: %d %s", r.code, r.body)
	}
}

// An answer larger than a worker may send fails alone with a 500 that says
// why; the worker is not restarted (a RESULT over the frame limit used to
// be a protocol error that killed it, and every request it held).
func TestPythonOversizedAnswerFailsAlone(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, `
import json

def model_fn(model_dir):
    return None

def transform_fn(model, data, content_type, accept):
    return b"x" * json.loads(data), "application/octet-stream"
`), true, nil)
	limit, _ := answerLimits(ts.cfg.MaxPayload, ts.cfg.BatchSize)
	pid := ts.pids()[0]
	n := limit - int64(len("application/octet-stream"))
	if r := ts.invoke(t, strconv.FormatInt(n, 10)); r.code != 200 || int64(len(r.body)) != n {
		t.Fatalf("an answer at the limit: %d, %d bytes", r.code, len(r.body))
	}
	r := ts.invoke(t, strconv.FormatInt(n+1, 10))
	if r.code != 500 {
		t.Fatalf("an answer over the limit: %d, %d bytes", r.code, len(r.body))
	}
	want := fmt.Sprintf("the response of %d bytes (body, content type and headers) is larger than the model server's limit of %d bytes", limit+1, limit)
	if e := r.errorBody(t); e.Type != "ResponseTooLarge" || !strings.Contains(e.Message, want) {
		t.Fatalf("an answer over the limit: %d %+v", r.code, e)
	}
	if r := ts.invoke(t, "3"); r.code != 200 || r.body != "xxx" {
		t.Fatalf("after: %d %q", r.code, r.body)
	}
	if got := ts.pids(); len(got) != 1 || got[0] != pid {
		t.Fatalf("worker pids %v, want still %d", got, pid)
	}
}

func TestAnswerLimits(t *testing.T) {
	for _, c := range []struct {
		payload      int64
		batch        int
		answer       int64
		frameAtLeast int64
	}{
		{DefaultMaxPayload, 1, 4 * DefaultMaxPayload, 4*DefaultMaxPayload + 1},
		{1000, 8, 4 * DefaultMaxPayload, 8*4*DefaultMaxPayload + 1},
		{100 << 20, 2, 400 << 20, 800<<20 + 1},
		{2 << 30, 1, math.MaxUint32 - 1<<20, math.MaxUint32},
		{1 << 30, 64, (math.MaxUint32 - 1<<20) / 64, 0},
		{DefaultMaxPayload, MaxBatchSize, (math.MaxUint32 - 1<<20) / MaxBatchSize, 0},
	} {
		answer, frame := answerLimits(c.payload, c.batch)
		if answer != c.answer || int64(frame) < c.frameAtLeast || int64(frame) > math.MaxUint32 || int64(frame) < answer*int64(c.batch) {
			t.Errorf("answerLimits(%d, %d) = %d, %d; want answer %d, frame ≥ %d and ≤ 2^32-1", c.payload, c.batch, answer, frame, c.answer, c.frameAtLeast)
		}
	}
}
