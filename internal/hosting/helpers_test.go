package hosting

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/invoke"
	"github.com/sagebox/sagebox/internal/logstore"
	"github.com/sagebox/sagebox/internal/metastore"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/staging/localobj"
)

// These tests run real `sagebox model-server` processes (the binary built
// once by TestMain) under the real supervisor, with Debian's python3 and
// torch serving a TorchScript model made here, against the real
// metadata, log and object stores.

const systemPython = "/usr/bin/python3"

var (
	sageboxBin string // built by TestMain
	modelPT    []byte // a TorchScript model, made once
	fixtureErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hosting-test-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		sageboxBin = filepath.Join(dir, "sagebox")
		// HOSTING_TEST_SAGEBOX runs the tests against another build (a
		// branch's model server).
		if bin := os.Getenv("HOSTING_TEST_SAGEBOX"); bin != "" {
			b, err := os.ReadFile(bin)
			if err == nil {
				err = os.WriteFile(sageboxBin, b, 0o755)
			}
			if err != nil {
				fixtureErr = err
				return m.Run()
			}
		} else if out, err := exec.Command("go", "build", "-o", sageboxBin, "../../cmd/sagebox").CombinedOutput(); err != nil {
			fixtureErr = fmt.Errorf("build sagebox: %v\n%s", err, out)
			return m.Run()
		}
		script := filepath.Join(dir, "make_model.py")
		os.WriteFile(script, []byte(makeModel), 0o644)
		pt := filepath.Join(dir, "model.pt")
		if out, err := exec.Command(systemPython, script, pt).CombinedOutput(); err != nil {
			fixtureErr = fmt.Errorf("make model (needs %s with torch): %v\n%s", systemPython, err, out)
			return m.Run()
		}
		modelPT, _ = os.ReadFile(pt)
		return m.Run()
	}()
	os.Exit(code)
}

// The model doubles its input's row sums.
const makeModel = `
import sys, torch
class M(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True) * 2
torch.jit.script(M()).save(sys.argv[1])
`

// inferencePy answers {"version": <version.txt>, "y": ...}; model_fn
// raises the text of fail.txt when there is one.
const inferencePy = `
import json, os, torch

def model_fn(model_dir):
    fail = os.path.join(model_dir, "fail.txt")
    if os.path.exists(fail):
        raise RuntimeError(open(fail).read().strip())
    version = open(os.path.join(model_dir, "version.txt")).read().strip()
    return torch.jit.load(os.path.join(model_dir, "model.pt")), version

def input_fn(body, content_type):
    return torch.tensor(json.loads(body), dtype=torch.float32)

def predict_fn(x, model):
    return model[0](x), model[1]

def output_fn(pred, accept):
    return json.dumps({"version": pred[1], "y": pred[0].tolist(), "pid": os.getpid()})
`

func requireFixtures(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts model servers")
	}
	if fixtureErr != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal(fixtureErr)
		}
		t.Skip(fixtureErr)
	}
}

// fakeRoutes is the route table (invoke's Table is another branch's): it
// records what was published and counts requests in flight.
type fakeRoutes struct {
	mu      sync.Mutex
	routes  map[string]*invoke.Route
	pending map[string]int
	sets    int
	seen    map[string]bool // every instance id ever published
}

func newFakeRoutes() *fakeRoutes {
	return &fakeRoutes{routes: map[string]*invoke.Route{}, pending: map[string]int{}, seen: map[string]bool{}}
}

func (f *fakeRoutes) Set(ep string, r *invoke.Route) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[ep] = r
	f.sets++
	for _, v := range r.Variants {
		for _, in := range v.Instances {
			f.seen[in.ID] = true
		}
	}
}

func (f *fakeRoutes) Delete(ep string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.routes, ep)
}

func (f *fakeRoutes) Outstanding(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending[id]
}

func (f *fakeRoutes) get(ep string) *invoke.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes[ep]
}

// instances is every instance of the endpoint's route.
func (f *fakeRoutes) instances(ep string) []invoke.Instance {
	var out []invoke.Instance
	if r := f.get(ep); r != nil {
		for _, v := range r.Variants {
			out = append(out, v.Instances...)
		}
	}
	return out
}

// answer is what the test model says.
type answer struct {
	Version string      `json:"version"`
	Y       [][]float64 `json:"y"`
	PID     int         `json:"pid"`
}

// invoke sends one request as the data plane would: through an instance
// of the last published route (round-robin by n), counted as
// outstanding, retrying on a fresh route when the dial fails.
func (f *fakeRoutes) invoke(ep string, n int) (answer, error) {
	var last error
	for try := 0; try < 50; try++ {
		insts := f.instances(ep)
		if len(insts) == 0 {
			last = errors.New("no instance in the route")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		in := insts[(n+try)%len(insts)]
		f.mu.Lock()
		f.pending[in.ID]++
		f.mu.Unlock()
		a, dialErr, err := post(in.Addr)
		f.mu.Lock()
		f.pending[in.ID]--
		f.mu.Unlock()
		if dialErr {
			last = err
			time.Sleep(5 * time.Millisecond)
			continue
		}
		return a, err
	}
	return answer{}, fmt.Errorf("no instance answered: %w", last)
}

func post(addr string) (a answer, dialErr bool, err error) {
	c := unixClient(strings.TrimPrefix(addr, "unix:"), 10*time.Second)
	defer c.CloseIdleConnections()
	resp, err := c.Post("http://instance/invocations", "application/json", strings.NewReader("[[1,2,3]]"))
	if err != nil {
		return a, isDialError(err), err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return a, false, fmt.Errorf("instance answered %d: %s", resp.StatusCode, b)
	}
	if err := jsonUnmarshal(b, &a); err != nil {
		return a, false, fmt.Errorf("decode %q: %w", b, err)
	}
	return a, false, nil
}

func isDialError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), "dial")
}

type env struct {
	t      *testing.T
	dir    string
	db     *metastore.DB
	logs   *logstore.Store
	objs   *objectstore.Store
	routes *fakeRoutes
	pool   *capacity.Pool
	mut    func(*Config)
	m      *Manager
}

func newEnv(t *testing.T, mut func(*Config)) *env {
	t.Helper()
	requireFixtures(t)
	ctx := context.Background()
	// Short: the socket paths live under it.
	dir, err := os.MkdirTemp("", "hb-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, routes: newFakeRoutes(), pool: capacity.NewPool(capacity.Resources{Slots: 8, MemoryMiB: 1 << 20}), mut: mut}
	if e.db, err = metastore.Open(ctx, filepath.Join(dir, "meta.db")); err != nil {
		t.Fatal(err)
	}
	if e.logs, err = logstore.Open(ctx, filepath.Join(dir, "logs")); err != nil {
		t.Fatal(err)
	}
	if e.objs, err = objectstore.Open(filepath.Join(dir, "s3")); err != nil {
		t.Fatal(err)
	}
	if err := e.objs.CreateBucket(ctx, "models"); err != nil {
		t.Fatal(err)
	}
	e.m = e.manager()
	t.Cleanup(func() {
		e.m.Close()
		e.killAll()
		e.db.Close()
		e.logs.Close()
		os.RemoveAll(dir)
	})
	return e
}

// manager starts a Manager over the env's data directory (a second one is
// a restarted server).
func (e *env) manager() *Manager {
	e.t.Helper()
	cfg := Config{
		DataDir: e.dir, Store: e.db, NotFound: metastore.ErrNotFound, Objects: localobj.New(e.objs),
		Logs: e.logs, Routes: e.routes, Capacity: e.pool, InstanceResources: capacity.Resources{Slots: 1, MemoryMiB: 1},
		ModelServer: []string{sageboxBin, "model-server"}, Supervisor: []string{sageboxBin, "exec-shim"},
		Python: systemPython, Region: "us-east-1",
		StartupTimeout: 60 * time.Second, StopGrace: 5 * time.Second, RestartBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if e.mut != nil {
		e.mut(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// killAll kills whatever model servers are left (a failed test).
func (e *env) killAll() {
	dirs, _ := filepath.Glob(filepath.Join(e.dir, "endpoints", "*", "*", "*", "i-*"))
	for _, d := range dirs {
		if h, err := procAdopt(d); err == nil {
			h.Signal(syscall.SIGKILL)
		}
	}
}

// tarGz packs files (name → content) as a model.tar.gz.
func tarGz(t *testing.T, files map[string]string) []byte { return tarGzRoot(t, files, false) }

// tarGzRoot is tarGz whose first entry is, with root, the directory "/"
// (what the SageMaker SDK's repack writes).
func tarGzRoot(t *testing.T, files map[string]string, root bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if root {
		tw.WriteHeader(&tar.Header{Name: "/", Mode: 0o755, Typeflag: tar.TypeDir})
	}
	for name, body := range files {
		mode := int64(0o644)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// modelFiles is a good model directory of version v.
func modelFiles(v string) map[string]string {
	return map[string]string{"model.pt": string(modelPT), "code/inference.py": inferencePy, "version.txt": v}
}

// put stores body at s3://models/key and returns the URI.
func (e *env) put(key string, body []byte) string {
	e.t.Helper()
	if _, err := e.objs.Put(context.Background(), "models", key, bytes.NewReader(body), objectstore.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return "s3://models/" + key
}

// model is a one-container model serving the archive at uri.
func model(name, uri string) sagebox.Model {
	return sagebox.Model{
		ModelName: name, ModelArn: "arn:aws:sagemaker:us-east-1:000000000000:model/" + name,
		PrimaryContainer: &sagebox.ContainerDefinition{
			Image: "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13-cpu-py39", ModelDataUrl: uri,
			Environment: map[string]string{
				"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
				"SAGEMAKER_MODEL_SERVER_WORKERS": "1",
			},
		},
	}
}

func variant(name string, m sagebox.Model, count int, weight float64) sagebox.DeployedVariant {
	return sagebox.DeployedVariant{VariantName: name, InstanceType: "ml.m5.large", InstanceCount: count, Weight: weight, Model: m}
}

func deployment(vs ...sagebox.DeployedVariant) *sagebox.Deployment {
	return &sagebox.Deployment{EndpointConfigName: "config", Variants: vs}
}

// create does what CreateEndpoint does: reserve, store Creating, deploy.
func (e *env) create(name string, dep *sagebox.Deployment) error {
	ctx := context.Background()
	release, err := e.m.Reserve(ctx, name, dep)
	if err != nil {
		return err
	}
	ep := &sagebox.Endpoint{EndpointName: name, EndpointArn: "arn:aws:sagemaker:us-east-1:000000000000:endpoint/" + name}
	ep.BeginCreate(time.Now(), dep)
	if err := e.db.CreateEndpoint(ctx, ep); err != nil {
		release()
		return err
	}
	return e.m.Deploy(ctx, name)
}

// update does what UpdateEndpoint does.
func (e *env) update(name string, dep *sagebox.Deployment) error {
	ctx := context.Background()
	release, err := e.m.Reserve(ctx, name, dep)
	if err != nil {
		return err
	}
	if _, err := e.db.UpdateEndpoint(ctx, name, func(x *sagebox.Endpoint) error { return x.BeginUpdate(time.Now(), dep) }); err != nil {
		release()
		return err
	}
	return e.m.Deploy(ctx, name)
}

// remove does what DeleteEndpoint does.
func (e *env) remove(name string) error {
	ctx := context.Background()
	if _, err := e.db.UpdateEndpoint(ctx, name, func(x *sagebox.Endpoint) error { return x.BeginDelete(time.Now()) }); err != nil {
		return err
	}
	return e.m.Delete(ctx, name)
}

// wait polls the endpoint until ok says so.
func (e *env) wait(name, what string, ok func(*sagebox.Endpoint) bool) *sagebox.Endpoint {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ep, err := e.db.Endpoint(context.Background(), name)
		if err == nil && ok(ep) {
			return ep
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting until %s: %+v %v", what, ep, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) waitStatus(name, status string) *sagebox.Endpoint {
	e.t.Helper()
	return e.wait(name, "endpoint is "+status, func(ep *sagebox.Endpoint) bool {
		if ep.EndpointStatus == sagebox.EndpointFailed && status != sagebox.EndpointFailed {
			e.t.Fatalf("endpoint failed: %s", ep.FailureReason)
		}
		return ep.EndpointStatus == status
	})
}

// waitFor polls cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pids is the supervisor pids of the endpoint's instances on disk.
func (e *env) pids(name string) map[string]int {
	out := map[string]int{}
	dirs, _ := filepath.Glob(filepath.Join(e.dir, "endpoints", name, "*", "*", "i-*"))
	for _, d := range dirs {
		if h, err := procAdopt(d); err == nil {
			out[filepath.Base(d)] = h.Pid()
		}
	}
	return out
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie counts as gone.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func procAdopt(dir string) (*proc.Handle, error) { return proc.Adopt(context.Background(), dir) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
