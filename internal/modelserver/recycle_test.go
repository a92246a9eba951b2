package modelserver

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memoryInference reproduces R8 of the reliability report: "leak" keeps
// 50 MB per request under an address-space limit of its size + 300 MB
// (set by the handler itself), so a request ends in MemoryError; "grow"
// touches 700 MB once (peak RSS). Every answer is the worker's pid.
const memoryInference = `
import os, resource, time
HOLD = []
def model_fn(d): return None
def input_fn(b, ct): return b.encode() if isinstance(b, str) else bytes(b)
def predict_fn(x, m):
    x = x.strip(b'"')
    if x == b"busy":
        time.sleep(0.3)
    elif x == b"oom":
        raise MemoryError("no room")
    elif x == b"leak":
        if not HOLD:
            with open("/proc/self/status") as f:
                vm = [int(l.split()[1]) for l in f if l.startswith("VmSize:")][0] * 1024
            resource.setrlimit(resource.RLIMIT_AS, (vm + (300 << 20), resource.RLIM_INFINITY))
        HOLD.append(bytearray(50 << 20))
    elif x == b"grow":
        b = b"x" * (700 << 20)
        del b
    return str(os.getpid()).encode()
def output_fn(p, a): return p, "text/plain"
`

// A worker whose handler ran out of memory answers that request 507 saying
// it is being restarted, and is replaced: /ping answers 503 until the new
// one has loaded, and no later request fails.
func TestPythonMemoryErrorRecyclesWorker(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, memoryInference), true, nil)
	pid := ts.pids()[0]
	var oom response
	for i := 0; i < 20; i++ {
		r := ts.invoke(t, "leak", "Content-Type", "application/octet-stream")
		if r.code == 507 {
			oom = r
			break
		}
		if r.code != 200 || r.body != strconv.Itoa(pid) {
			t.Fatalf("leak %d: %d %s", i, r.code, r.body)
		}
	}
	if oom.code != 507 {
		t.Fatal("no request ran out of memory")
	}
	if e := oom.errorBody(t); !strings.Contains(e.Message, "ran out of memory; it is being restarted") {
		t.Fatalf("507 message %q", e.Message)
	}
	eventually(t, "/ping 503 while the worker restarts", func() bool {
		r := ts.do(t, "GET", "/ping", "")
		return r.code == 503 && strings.Contains(r.body, "ran out of memory (MemoryError)")
	})
	ts.waitRestarted(t, pid)
	if r := ts.do(t, "GET", "/ping", ""); r.code != 200 {
		t.Fatalf("/ping after the restart: %d %s", r.code, r.body)
	}
	newPID := ts.pids()[0]
	for i := 0; i < 10; i++ {
		if r := ts.invoke(t, "ok", "Content-Type", "application/octet-stream"); r.code != 200 || r.body != strconv.Itoa(newPID) {
			t.Fatalf("after the restart, request %d: %d %s (new pid %d)", i, r.code, r.body, newPID)
		}
	}
}

// With batching off, the requests taken together with the one that ran out
// of memory: the one before it is answered by the old worker (its answer
// may be held back with the 507), the one after by the new one, and the
// worker restarts once.
func TestPythonPipelinedMemoryErrorRestartsOnce(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, memoryInference), true, takeSlowTogether)
	pid := ts.pids()[0]
	rs := queueBehind(t, ts, `"busy"`, []string{`"a"`, `"oom"`, `"b"`})
	if rs[0].code != 200 || rs[0].body != strconv.Itoa(pid) {
		t.Errorf("the request before: %d %s (old pid %d)", rs[0].code, rs[0].body, pid)
	}
	if rs[1].code != 507 || !strings.Contains(rs[1].body, "it is being restarted") {
		t.Errorf("the request that ran out of memory: %d %s", rs[1].code, rs[1].body)
	}
	if rs[2].code != 200 || rs[2].body == strconv.Itoa(pid) {
		t.Errorf("the request after: %d %s (old pid %d)", rs[2].code, rs[2].body, pid)
	}
	ts.waitRestarted(t, pid)
	if w := ts.Health().Workers[0]; w.Restarts != 1 {
		t.Errorf("worker restarted %d times, want 1", w.Restarts)
	}
}

// A worker whose peak RSS passed SAGEBOX_WORKER_MAX_RSS_MB answers the
// request that took it there, then is replaced; the next request runs on
// a new process.
func TestPythonMaxRSSRecyclesWorker(t *testing.T) {
	requireTorch(t)
	ts := startPyServer(t, pyModelDir(t, memoryInference), true, func(c *Config) { c.WorkerMaxRSS = 600 << 20 })
	pid := ts.pids()[0]
	for i := 0; i < 3; i++ { // under the limit: no recycling
		if r := ts.invoke(t, "ok", "Content-Type", "application/octet-stream"); r.code != 200 || r.body != strconv.Itoa(pid) {
			t.Fatalf("ok %d: %d %s", i, r.code, r.body)
		}
	}
	if r := ts.invoke(t, "grow", "Content-Type", "application/octet-stream"); r.code != 200 || r.body != strconv.Itoa(pid) {
		t.Fatalf("grow: %d %s", r.code, r.body)
	}
	r := ts.invoke(t, "ok", "Content-Type", "application/octet-stream")
	if r.code != 200 || r.body == strconv.Itoa(pid) {
		t.Fatalf("after grow: %d %s (old pid %d)", r.code, r.body, pid)
	}
	if !strings.Contains(ts.logText(), "passed its memory limit of 600 MiB") {
		t.Errorf("log does not say why the worker was recycled")
	}
}

// A model.tar.gz that unpacks past the configured limit is refused with an
// error naming the limit.
func TestModelDataLimit(t *testing.T) {
	tgz := filepath.Join(t.TempDir(), "model.tar.gz")
	f, err := os.Create(tgz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	big := make([]byte, 3<<20)
	if err := tw.WriteHeader(&tar.Header{Name: "big.bin", Mode: 0o644, Size: int64(len(big)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	env := func(k string) string {
		if k == "SAGEBOX_MODEL_DATA_MAX_MB" {
			return "2"
		}
		return ""
	}
	cfg, err := ConfigFromEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ModelData = tgz
	cfg.CacheDir = t.TempDir()
	cfg.Python = systemPython
	cfg.GPUs = 0
	srv, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start(context.Background())
	if err == nil {
		srv.Shutdown(context.Background())
		t.Fatal("Start accepted a model.tar.gz past the limit")
	}
	if !strings.Contains(err.Error(), "SAGEBOX_MODEL_DATA_MAX_MB=2") || !strings.Contains(err.Error(), "more than 2.0 MiB") {
		t.Fatalf("error %q does not name the limit", err)
	}
}
