package training

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/staging/localobj"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/training/driver/fake"
	"github.com/sagebox/sagebox/internal/training/local"
)

// TestMain doubles as the shim: the runner under test starts this test
// binary as "<binary> exec-shim --dir ... -- argv" (the helper-process
// pattern), so the shim runs for real without building cmd/sagebox.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-shim" {
		os.Exit(proc.RunSupervisor(context.Background(), os.Args[2:]))
	}
	os.Exit(m.Run())
}

const testPython = "/usr/bin/python3"

// torchAvailable says whether Debian's python3 can import torch.
var torchAvailable = sync.OnceValue(func() bool {
	return exec.Command(testPython, "-c", "import torch").Run() == nil
})

// requireTorch skips (or, with SAGEBOX_STRICT_TOOLS=1, fails) a test that
// runs real torch scripts when torch is missing.
func requireTorch(t testing.TB) {
	t.Helper()
	if torchAvailable() {
		return
	}
	if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
		t.Fatalf("%s cannot import torch (SAGEBOX_STRICT_TOOLS=1)", testPython)
	}
	t.Skipf("%s cannot import torch; install python3-torch", testPython)
}

func requirePython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(testPython); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("%s missing", testPython)
		}
		t.Skipf("%s missing", testPython)
	}
}

// fakeJobs is a JobStore whose methods are function fields.
type fakeJobs struct {
	TrainingJobFunc            func(ctx context.Context, name string) (*sagebox.TrainingJob, error)
	UpdateTrainingJobFunc      func(ctx context.Context, name string, fn func(*sagebox.TrainingJob) error) (*sagebox.TrainingJob, error)
	TrainingJobsWithStatusFunc func(ctx context.Context, statuses ...string) ([]*sagebox.TrainingJob, error)
	AddMetricsFunc             func(ctx context.Context, job string, points []sagebox.MetricPoint) error
}

var _ JobStore = (*fakeJobs)(nil)

func (f *fakeJobs) TrainingJob(ctx context.Context, name string) (*sagebox.TrainingJob, error) {
	return f.TrainingJobFunc(ctx, name)
}

func (f *fakeJobs) UpdateTrainingJob(ctx context.Context, name string, fn func(*sagebox.TrainingJob) error) (*sagebox.TrainingJob, error) {
	return f.UpdateTrainingJobFunc(ctx, name, fn)
}

func (f *fakeJobs) TrainingJobsWithStatus(ctx context.Context, statuses ...string) ([]*sagebox.TrainingJob, error) {
	return f.TrainingJobsWithStatusFunc(ctx, statuses...)
}

func (f *fakeJobs) AddMetrics(ctx context.Context, job string, points []sagebox.MetricPoint) error {
	return f.AddMetricsFunc(ctx, job, points)
}

// memJobs is the in-memory state behind a fakeJobs.
type memJobs struct {
	mu      sync.Mutex
	jobs    map[string][]byte // JSON, so callers never share memory
	metrics map[string][]sagebox.MetricPoint
	persist string // when set, jobs are also written there after each update
}

func newMemJobs() (*fakeJobs, *memJobs) {
	m := &memJobs{jobs: map[string][]byte{}, metrics: map[string][]sagebox.MetricPoint{}}
	load := func(name string) (*sagebox.TrainingJob, error) {
		b, ok := m.jobs[name]
		if !ok {
			return nil, fmt.Errorf("job %s: %w", name, os.ErrNotExist)
		}
		var j sagebox.TrainingJob
		return &j, json.Unmarshal(b, &j)
	}
	return &fakeJobs{
		TrainingJobFunc: func(ctx context.Context, name string) (*sagebox.TrainingJob, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			return load(name)
		},
		UpdateTrainingJobFunc: func(ctx context.Context, name string, fn func(*sagebox.TrainingJob) error) (*sagebox.TrainingJob, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			j, err := load(name)
			if err != nil {
				return nil, err
			}
			if err := fn(j); err != nil {
				return nil, err
			}
			b, err := json.Marshal(j)
			if err != nil {
				return nil, err
			}
			m.jobs[name] = b
			if m.persist != "" {
				all, _ := json.Marshal(m.jobs)
				if err := statefile.Write(m.persist, all); err != nil {
					return nil, err
				}
			}
			return load(name)
		},
		TrainingJobsWithStatusFunc: func(ctx context.Context, statuses ...string) ([]*sagebox.TrainingJob, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			var out []*sagebox.TrainingJob
			for name := range m.jobs {
				j, _ := load(name)
				for _, s := range statuses {
					if j.TrainingJobStatus == s {
						out = append(out, j)
					}
				}
			}
			return out, nil
		},
		AddMetricsFunc: func(ctx context.Context, job string, points []sagebox.MetricPoint) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.metrics[job] = append(m.metrics[job], points...)
			return nil
		},
	}, m
}

func (m *memJobs) put(t testing.TB, j *sagebox.TrainingJob) {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.jobs[j.TrainingJobName] = b
	m.mu.Unlock()
}

func (m *memJobs) get(t testing.TB, name string) *sagebox.TrainingJob {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var j sagebox.TrainingJob
	if err := json.Unmarshal(m.jobs[name], &j); err != nil {
		t.Fatal(err)
	}
	return &j
}

// update changes a stored job the way the control plane would.
func (m *memJobs) update(t testing.TB, name string, fn func(*sagebox.TrainingJob)) {
	t.Helper()
	j := m.get(t, name)
	fn(j)
	m.put(t, j)
}

// wait polls until the job satisfies cond.
func (m *memJobs) wait(t testing.TB, name string, timeout time.Duration, cond func(*sagebox.TrainingJob) bool) *sagebox.TrainingJob {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := m.get(t, name)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met in %v; status %s/%s, reason %q, transitions %s",
				name, timeout, j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason, transitionsString(j))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (m *memJobs) waitEnd(t testing.TB, name string, timeout time.Duration) *sagebox.TrainingJob {
	t.Helper()
	return m.wait(t, name, timeout, func(j *sagebox.TrainingJob) bool { return sagebox.Terminal(j.TrainingJobStatus) })
}

func transitionsString(j *sagebox.TrainingJob) string {
	var parts []string
	for _, tr := range j.SecondaryStatusTransitions {
		parts = append(parts, tr.Status)
	}
	return strings.Join(parts, " → ")
}

// fakeLogs is a LogSink whose Append is a function field.
type fakeLogs struct {
	AppendFunc func(ctx context.Context, group, stream string, events []sagebox.LogEvent) error
}

var _ LogSink = (*fakeLogs)(nil)

func (f *fakeLogs) Append(ctx context.Context, group, stream string, events []sagebox.LogEvent) error {
	return f.AppendFunc(ctx, group, stream, events)
}

// memLogs keeps appended events per stream.
type memLogs struct {
	mu      sync.Mutex
	streams map[string][]sagebox.LogEvent
}

func newMemLogs() (*fakeLogs, *memLogs) {
	m := &memLogs{streams: map[string][]sagebox.LogEvent{}}
	return &fakeLogs{AppendFunc: func(ctx context.Context, group, stream string, events []sagebox.LogEvent) error {
		if group != sagebox.TrainingLogGroup {
			return fmt.Errorf("unexpected group %s", group)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.streams[stream] = append(m.streams[stream], events...)
		return nil
	}}, m
}

// lines returns the messages of the streams whose name starts with prefix,
// stream by stream in name order.
func (m *memLogs) lines(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for s := range m.streams {
		if strings.HasPrefix(s, prefix) {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	var out []string
	for _, s := range names {
		for _, e := range m.streams[s] {
			out = append(out, e.Message)
		}
	}
	return out
}

func (m *memLogs) text(prefix string) string { return strings.Join(m.lines(prefix), "\n") }

// env is one test's sagebox: data dir, object store with bucket "bkt",
// fake job store and log sink, and a runner.
type env struct {
	t       testing.TB
	dataDir string
	store   *objectstore.Store
	jobs    *fakeJobs
	mem     *memJobs
	logs    *memLogs
	sink    *fakeLogs
	runner  *Runner
	cfg     testConfig
	driver  *local.Driver
}

func newEnv(t testing.TB, tweak ...func(*testConfig)) *env {
	t.Helper()
	return newEnvAt(t, t.TempDir(), tweak...)
}

// newEnvAt is newEnv on dir, which may hold an earlier env's data.
func newEnvAt(t testing.TB, dir string, tweak ...func(*testConfig)) *env {
	t.Helper()
	store, err := objectstore.OpenWithOptions(filepath.Join(dir, "s3"), objectstore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := os.Stat(filepath.Join(dir, "jobs")); err != nil {
		if err := store.CreateBucket(context.Background(), "bkt"); err != nil {
			t.Fatal(err)
		}
	}
	jobs, mem := newMemJobs()
	sink, logs := newMemLogs()
	e := &env{t: t, dataDir: dir, store: store, jobs: jobs, mem: mem, logs: logs, sink: sink}
	e.cfg = testConfig{
		Config: Config{
			DataDir:            dir,
			Region:             "us-east-1",
			StopGrace:          5 * time.Second,
			PollInterval:       50 * time.Millisecond,
			CheckpointInterval: 200 * time.Millisecond,
		},
		Local: local.Config{
			DataDir:           dir,
			Objects:           localobj.New(store),
			Python:            pyruntime.Interpreter{Path: testPython, Source: "test"},
			SagemakerEndpoint: "http://127.0.0.1:9",
			ShimCommand:       []string{os.Args[0], "exec-shim"},
			// The tests' drivers run side by side: one set of master ports.
			Ports: testPorts,
			// Tests read finished jobs' workspaces.
			KeepWorkspaces: time.Hour, KeepFailedWorkspaces: time.Hour,
		},
	}
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.runner = e.newRunner()
	t.Cleanup(e.cleanup)
	return e
}

// testPorts are the master ports of every test's jobs (see local.Ports).
var testPorts = local.NewPorts()

// testConfig is a runner's and its local driver's configuration together,
// so that a test tweaks either in one function.
type testConfig struct {
	Config
	Local local.Config
}

func (e *env) newRunner() *Runner {
	logger := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lc := e.cfg.Local
	lc.Logger = logger
	e.driver = local.New(lc)
	cfg := e.cfg.Config
	cfg.Driver = e.driver
	return NewRunner(cfg, e.jobs, e.sink, logger)
}

// cleanup closes the runner and kills every process a job left behind.
func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.runner.Close(ctx)
	killJobProcesses(e.dataDir)
}

func killJobProcesses(dataDir string) {
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "jobs", "*", ".sagebox", "*"))
	for _, dir := range dirs {
		if h, err := proc.Adopt(context.Background(), dir); err == nil {
			_ = h.Signal(syscall.SIGKILL)
		}
	}
}

// testWriter sends slog output to t.Log, and nowhere after the test ends.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // logging after the test returned
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) putObject(key string, body []byte) {
	e.t.Helper()
	if _, err := e.store.Put(context.Background(), "bkt", key, bytes.NewReader(body), objectstore.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// putSource packs files into sourcedir.tar.gz in the bucket and returns
// the hyperparameters that point a job at it.
func (e *env) putSource(job string, files map[string]string) map[string]string {
	e.t.Helper()
	dir := e.t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := archive.WriteTarGz(context.Background(), &buf, dir); err != nil {
		e.t.Fatal(err)
	}
	key := job + "/source/sourcedir.tar.gz"
	e.putObject(key, buf.Bytes())
	return map[string]string{
		"sagemaker_program":             `"train.py"`,
		"sagemaker_submit_directory":    `"s3://bkt/` + key + `"`,
		"sagemaker_container_log_level": "20",
		"sagemaker_job_name":            `"` + job + `"`,
		"sagemaker_region":              `"us-east-1"`,
	}
}

func (e *env) getObject(key string) []byte {
	e.t.Helper()
	obj, err := e.store.Get(context.Background(), "bkt", key)
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// extractObject unpacks a tar.gz object and returns its files.
func (e *env) extractObject(key string) map[string]string {
	e.t.Helper()
	dir := e.t.TempDir()
	if err := archive.Extract(context.Background(), bytes.NewReader(e.getObject(key)), dir); err != nil {
		e.t.Fatalf("extract %s: %v", key, err)
	}
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// submit stores job as the control plane would and submits it.
func (e *env) submit(job *sagebox.TrainingJob) {
	e.t.Helper()
	e.mem.put(e.t, job)
	if err := e.runner.Submit(context.Background(), job.TrainingJobName); err != nil {
		e.t.Fatal(err)
	}
}

// newTestJob is a job as CreateTrainingJob stores it.
func newTestJob(name string, hps map[string]string, opts ...func(*sagebox.TrainingJob)) *sagebox.TrainingJob {
	now := time.Now()
	j := &sagebox.TrainingJob{
		TrainingJobName:        name,
		TrainingJobArn:         "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + name,
		AlgorithmSpecification: &sagebox.AlgorithmSpecification{TrainingImage: "pytorch-training:1.13-cpu-py3", TrainingInputMode: "File"},
		HyperParameters:        hps,
		ResourceConfig:         &sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: 1, VolumeSizeInGB: 30},
		OutputDataConfig:       &sagebox.OutputDataConfig{S3OutputPath: "s3://bkt/output"},
		StoppingCondition:      &sagebox.StoppingCondition{MaxRuntimeInSeconds: 600},
		TrainingJobStatus:      sagebox.StatusInProgress,
		SecondaryStatus:        sagebox.SecondaryStarting,
		SecondaryStatusTransitions: []sagebox.StatusTransition{{
			Status: sagebox.SecondaryStarting, StartTime: sagebox.NewTime(now), StatusMessage: "Starting the training job",
		}},
		CreationTime:     sagebox.NewTime(now),
		LastModifiedTime: sagebox.NewTime(now),
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func withChannel(name, uri, dist string) func(*sagebox.TrainingJob) {
	return func(j *sagebox.TrainingJob) {
		j.InputDataConfig = append(j.InputDataConfig, sagebox.Channel{
			ChannelName: name,
			DataSource:  &sagebox.DataSource{S3DataSource: &sagebox.S3DataSource{S3DataType: "S3Prefix", S3Uri: uri, S3DataDistributionType: dist}},
		})
	}
}

func withHosts(n int) func(*sagebox.TrainingJob) {
	return func(j *sagebox.TrainingJob) { j.ResourceConfig.InstanceCount = n }
}

// fakeEnv is a Runner over the in-memory driver (driver/fake), with the
// in-memory job store and log sink: the lifecycle without processes,
// disk workspaces or Python. The runner's own state (tail offsets, the
// outcome) still lives in a temporary data directory.
type fakeEnv struct {
	t      testing.TB
	state  *fake.State
	jobs   *fakeJobs
	mem    *memJobs
	logs   *memLogs
	sink   *fakeLogs
	cfg    Config
	runner *Runner
	names  []string // submitted jobs, whose tasks cleanup ends
}

func newFakeEnv(t testing.TB, tweak ...func(*Config)) *fakeEnv {
	t.Helper()
	jobs, mem := newMemJobs()
	sink, logs := newMemLogs()
	e := &fakeEnv{t: t, state: fake.NewState(), jobs: jobs, mem: mem, logs: logs, sink: sink}
	e.cfg = Config{
		DataDir:            t.TempDir(),
		Region:             "us-east-1",
		StopGrace:          5 * time.Second,
		PollInterval:       5 * time.Millisecond,
		CheckpointInterval: time.Hour,
	}
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.runner = e.newRunner()
	t.Cleanup(e.cleanup)
	return e
}

// newRunner is a new server's Runner over the same backend state.
func (e *fakeEnv) newRunner() *Runner {
	logger := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := e.cfg
	cfg.Driver = fake.New(e.state)
	return NewRunner(cfg, e.jobs, e.sink, logger)
}

// closeRunner closes the runner (the server goes away; the tasks do not).
func (e *fakeEnv) closeRunner() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.runner.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *fakeEnv) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.runner.Close(ctx)
	for _, name := range e.names {
		for _, h := range e.state.Running(name) {
			e.state.Exit(name, h, 0)
		}
	}
}

// submit stores job as the control plane would and submits it.
func (e *fakeEnv) submit(job *sagebox.TrainingJob) {
	e.t.Helper()
	e.put(job)
	if err := e.runner.Submit(context.Background(), job.TrainingJobName); err != nil {
		e.t.Fatal(err)
	}
}

// put stores job without submitting it (a job a restarted server finds).
func (e *fakeEnv) put(job *sagebox.TrainingJob) {
	e.t.Helper()
	e.names = append(e.names, job.TrainingJobName)
	e.mem.put(e.t, job)
}

// stop is StopTrainingJob: the control plane's Stopping, then the runner.
func (e *fakeEnv) stop(name string) {
	e.t.Helper()
	e.mem.update(e.t, name, func(j *sagebox.TrainingJob) {
		if err := j.RequestStop(sagebox.SecondaryStopped, sagebox.MsgStopping, time.Now()); err != nil {
			e.t.Error(err)
		}
	})
	if err := e.runner.Stop(context.Background(), name); err != nil {
		e.t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
