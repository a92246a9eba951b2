package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testGroup is a Group of real Python workers behind a loopback HTTP
// server.
type testGroup struct {
	*Group
	url  string
	logs *lockedBuffer
}

// startPyGroup serves the containers file f with real Python workers, one
// worker per container (SAGEMAKER_MODEL_SERVER_WORKERS through the
// environment, as the command passes it).
func startPyGroup(t *testing.T, f *ContainersFile, wait bool) *testGroup {
	t.Helper()
	base := append(os.Environ(), "OMP_NUM_THREADS=1", "SAGEMAKER_MODEL_SERVER_WORKERS=1")
	cfgs, err := f.Configs(base)
	if err != nil {
		t.Fatal(err)
	}
	hosts := make([]string, len(cfgs))
	for i := range cfgs {
		hosts[i] = f.Containers[i].Hostname
		c := &cfgs[i]
		c.Python = systemPython
		c.Supervisor = testSupervisor()
		c.CacheDir = t.TempDir()
		c.GPUs = 0
		c.StartupTimeout = 60 * time.Second
		c.RequestTimeout = 30 * time.Second
		c.RestartBackoff = 50 * time.Millisecond
		c.ShutdownGrace = 5 * time.Second
	}
	logs := &lockedBuffer{}
	g, err := NewGroup(f.Mode, hosts, cfgs, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := g.HTTPServer(log.New(io.Discard, "", 0))
	go hs.Serve(ln)
	tg := &testGroup{Group: g, url: "http://" + ln.Addr().String(), logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var pids []int
		for _, w := range g.Health().Workers {
			if w.PID != 0 {
				pids = append(pids, w.PID)
			}
		}
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		hs.Shutdown(ctx)
		for _, pid := range pids {
			if processExists(pid) {
				t.Errorf("worker pid %d outlived Shutdown", pid)
			}
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wait {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		if err := g.WaitReady(ctx); err != nil {
			t.Fatalf("WaitReady: %v\n%s", err, logs.String())
		}
	}
	return tg
}

func (g *testGroup) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
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

// codeDir writes a model directory whose code/ holds files.
func codeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "code"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, "code", name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Stage 1 of the pipeline: CSV in, the values doubled by a torch op out,
// as JSON of a type of its own. It reports the Accept it was given.
const stage1 = `
import json, torch

def model_fn(model_dir):
    return torch.tensor(2.0)

def input_fn(data, content_type, context):
    if content_type != "text/csv":
        raise ValueError("stage 1 takes text/csv, not %r" % content_type)
    return torch.tensor([float(v) for v in data.split(",")])

def predict_fn(x, model):
    return x * model

def output_fn(pred, accept, context):
    context.set_response_header(0, "X-Stage-1", "dropped")
    return json.dumps({"doubled": pred.tolist(), "accept": accept}), "application/x-stage1+json"
`

// Stage 2 (SAGEMAKER_PROGRAM=stage2.py): stage 1's answer plus the
// client's raw CSV from context.original_request, summed with torch, in
// batches (predict_batch_fn, each input's original by its batch index).
const stage2 = `
import json, torch

def model_fn(model_dir):
    return torch.tensor(1.0)

def input_fn(data, content_type, context):
    if content_type != "application/x-stage1+json":
        raise ValueError("stage 2 got content type %r" % content_type)
    o = context.original_request
    raw = torch.tensor([float(v) for v in o.body.decode().split(",")])
    if raw[0] < 0:
        raise ValueError("negative input reached stage 2")
    prev = json.loads(data)
    attrs = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")
    return torch.tensor(prev["doubled"]), raw, prev["accept"], attrs

def predict_batch_fn(inputs, model, context):
    out = []
    for j, (prev, raw, stage1_accept, attrs) in enumerate(inputs):
        o = context.get_original_request(j)
        out.append({
            "sum": float(((prev + raw) * model).sum()),
            "orig_type": o.content_type, "orig_accept": o.accept,
            "stage1_accept": stage1_accept, "attrs": attrs, "batch": len(inputs),
        })
    return out

def output_fn(p, accept):
    row = [str(p["sum"]), p["orig_type"], p["orig_accept"], p["stage1_accept"], p["attrs"], str(p["batch"])]
    return ",".join(row), accept
`

func TestPythonSerialPipeline(t *testing.T) {
	requireTorch(t)
	g := startPyGroup(t, &ContainersFile{Mode: ModeSerial, Containers: []ContainerSpec{
		{Hostname: "featurize", ModelDir: codeDir(t, map[string]string{"inference.py": stage1})},
		{Hostname: "combine", ModelDir: codeDir(t, map[string]string{"stage2.py": stage2}), Env: map[string]string{
			"SAGEMAKER_PROGRAM": "stage2.py", "SAGEMAKER_TS_BATCH_SIZE": "3", "SAGEMAKER_TS_MAX_BATCH_DELAY": "5000",
		}},
	}}, true)

	// Three at once: stage 2 takes them in one batch, each with its own
	// original request.
	inputs := []string{"1,2,3", "10,20", "0.5"}
	sums := []string{"18.0", "90.0", "1.5"} // raw + 2×raw, summed
	var wg sync.WaitGroup
	got := make([]response, len(inputs))
	for i, in := range inputs {
		wg.Go(func() {
			got[i] = g.do(t, "POST", "/invocations", in, "Content-Type", "text/csv", "Accept", "text/csv",
				"X-Amzn-SageMaker-Custom-Attributes", "trace=abc")
		})
	}
	wg.Wait()
	for i, r := range got {
		want := sums[i] + ",text/csv,text/csv,application/json,trace=abc,3"
		if r.code != 200 || r.body != want {
			t.Errorf("input %q: %d %q, want 200 %q", inputs[i], r.code, r.body, want)
		}
		if ct := r.header.Get("Content-Type"); ct != "text/csv" {
			t.Errorf("input %q: content type %q, want the last stage's text/csv", inputs[i], ct)
		}
		if r.header.Get("X-Stage-1") != "" || r.header.Get(HeaderContainer) != "" {
			t.Errorf("input %q: headers %v: an intermediate stage's header or a container name on success", inputs[i], r.header)
		}
	}

	// A failure in stage 2 is stage 2's answer, naming it.
	r := g.do(t, "POST", "/invocations", "-1,1", "Content-Type", "text/csv")
	if r.code != 500 || r.header.Get(HeaderContainer) != "combine" || !strings.Contains(r.body, "negative input reached stage 2") {
		t.Fatalf("stage 2 failing: %d %v %s", r.code, r.header, r.body)
	}
	// And one in stage 1 stops the chain there.
	r = g.do(t, "POST", "/invocations", `{"a": 1}`, "Content-Type", "application/json")
	if r.code != 500 || r.header.Get(HeaderContainer) != "featurize" || !strings.Contains(r.body, "stage 1 takes text/csv") {
		t.Fatalf("stage 1 failing: %d %v %s", r.code, r.header, r.body)
	}

	if r := g.do(t, "GET", "/ping", ""); r.code != 200 {
		t.Fatalf("ping %d %s", r.code, r.body)
	}
	var h Health
	if r := g.do(t, "GET", pathHealth, ""); r.code != 200 || json.Unmarshal([]byte(r.body), &h) != nil {
		t.Fatalf("health %d %s", r.code, r.body)
	}
	if !h.Ready || len(h.Containers) != 2 || h.Containers[1].Hostname != "combine" || len(h.Workers) != 2 || h.Workers[1].Container != "combine" {
		t.Fatalf("health %+v", h)
	}

	// Metrics: the model's invocations, and each container's batches.
	r = g.do(t, "GET", pathMetrics, "")
	for _, want := range []string{
		`sagebox_model_requests_total{code="200"} 3`,
		`sagebox_model_requests_total{code="500"} 2`,
		`sagebox_model_workers_loaded 2`,
		`sagebox_model_batch_size_sum{container="combine"} 4`, // the batch of 3, then -1,1 alone
		`sagebox_model_batch_size_count{container="featurize"} 5`,
	} {
		if !strings.Contains(r.body, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
}

// A container whose model_fn raises keeps the model from being ready, and
// the health route names it with the exception's text.
func TestPythonPipelineLoadErrorNamesContainer(t *testing.T) {
	requireTorch(t)
	bad := "def model_fn(model_dir):\n    raise FileNotFoundError('weights.bin is missing from ' + model_dir)\n"
	g := startPyGroup(t, &ContainersFile{Mode: ModeSerial, Containers: []ContainerSpec{
		{Hostname: "first", ModelDir: codeDir(t, map[string]string{"inference.py": stage1})},
		{Hostname: "second", ModelDir: codeDir(t, map[string]string{"inference.py": bad})},
	}}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err := g.WaitReady(ctx)
	var le *LoadError
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "container second: ") || !strings.Contains(err.Error(), "weights.bin is missing") {
		t.Fatalf("WaitReady = %v", err)
	}
	if r := g.do(t, "GET", "/ping", ""); r.code != 500 || !strings.Contains(r.body, "container second: ") {
		t.Fatalf("ping: %d %s", r.code, r.body)
	}
	var h Health
	r := g.do(t, "GET", pathHealth, "")
	if err := json.Unmarshal([]byte(r.body), &h); err != nil {
		t.Fatal(err)
	}
	if h.Ready || !strings.Contains(h.Message, "container second: worker 0 could not load the model: FileNotFoundError: weights.bin is missing") {
		t.Fatalf("health message %q", h.Message)
	}
	if r := g.do(t, "POST", "/invocations", "1", "Content-Type", "text/csv"); r.code != 503 || r.header.Get(HeaderContainer) != "second" {
		t.Fatalf("invoke while the second cannot load: %d %v %s", r.code, r.header, r.body)
	}
}

func TestPythonDirectContainers(t *testing.T) {
	requireTorch(t)
	echo := func(name string) string {
		return "import torch\ndef model_fn(model_dir):\n    return torch.tensor(3.0)\n" +
			"def transform_fn(model, data, content_type, accept, context):\n" +
			"    o = context.original_request\n" +
			"    return '" + name + ":%s:%s' % (float(model * float(data)), o.body.decode()), 'text/plain'\n"
	}
	g := startPyGroup(t, &ContainersFile{Mode: ModeDirect, Containers: []ContainerSpec{
		{Hostname: "alpha", ModelDir: codeDir(t, map[string]string{"inference.py": echo("alpha")})},
		{Hostname: "beta", ModelDir: codeDir(t, map[string]string{"inference.py": echo("beta")})},
	}}, true)
	for _, host := range []string{"alpha", "beta"} {
		r := g.do(t, "POST", "/invocations", "2", "Content-Type", "text/csv", HeaderTargetContainer, host)
		if r.code != 200 || r.body != host+":6.0:2" {
			t.Errorf("to %s: %d %s", host, r.code, r.body)
		}
	}
	r := g.do(t, "POST", "/invocations", "2", "Content-Type", "text/csv")
	if r.code != 400 || !strings.Contains(r.body, "TargetContainerHostname") || !strings.Contains(r.body, "alpha, beta") {
		t.Errorf("no target: %d %s", r.code, r.body)
	}
	r = g.do(t, "POST", "/invocations", "2", "Content-Type", "text/csv", HeaderTargetContainer, "gamma")
	if r.code != 400 || !strings.Contains(r.errorBody(t).Message, `"gamma" is not a container of this model`) {
		t.Errorf("unknown target: %d %s", r.code, r.body)
	}
	r = g.do(t, "POST", "/invocations", "x", "Content-Type", "text/csv", HeaderTargetContainer, "beta")
	if r.code != 500 || r.header.Get(HeaderContainer) != "beta" {
		t.Errorf("a failure in beta: %d %v %s", r.code, r.header, r.body)
	}
}

// The ≤ 1.1 layout: model.pth at the top, no code/ in the archive, and
// SAGEMAKER_SUBMIT_DIRECTORY naming the S3 sourcedir.tar.gz that whoever
// prepares the model directory has extracted into code/; a local
// SAGEMAKER_SUBMIT_DIRECTORY is the code directory itself.
func TestPythonSubmitDirectory(t *testing.T) {
	requireTorch(t)
	code := "import os, torch\ndef model_fn(model_dir):\n    return torch.load(os.path.join(model_dir, 'model.pth'))\n" +
		"def transform_fn(model, data, content_type, accept):\n    return str(float((model * float(data)).sum()))\n"
	savePth := func(dir string) {
		t.Helper()
		out, err := exec.Command(systemPython, "-c", "import sys, torch; torch.save(torch.tensor([1.0, 2.0]), sys.argv[1])",
			filepath.Join(dir, "model.pth")).CombinedOutput()
		if err != nil {
			t.Fatalf("save model.pth: %v\n%s", err, out)
		}
	}
	// ≤ 1.1: model.pth at the top, code/ extracted from sourcedir.tar.gz.
	old := codeDir(t, map[string]string{"inference.py": code})
	savePth(old)
	// A local code directory outside the model directory.
	local, src := t.TempDir(), t.TempDir()
	savePth(local)
	if err := os.WriteFile(filepath.Join(src, "serve.py"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startPyGroup(t, &ContainersFile{Mode: ModeDirect, Containers: []ContainerSpec{
		{Hostname: "s3", ModelDir: old, Env: map[string]string{
			"SAGEMAKER_SUBMIT_DIRECTORY": "s3://bucket/job/source/sourcedir.tar.gz", "SAGEMAKER_PROGRAM": "inference.py"}},
		{Hostname: "local", ModelDir: local, Env: map[string]string{"SAGEMAKER_SUBMIT_DIRECTORY": src, "SAGEMAKER_PROGRAM": "serve.py"}},
	}}, true)
	for _, host := range []string{"s3", "local"} {
		if r := g.do(t, "POST", "/invocations", "2", "Content-Type", "text/csv", HeaderTargetContainer, host); r.code != 200 || r.body != "6.0" {
			t.Errorf("%s: %d %s", host, r.code, r.body)
		}
	}
}
