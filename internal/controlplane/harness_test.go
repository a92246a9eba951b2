package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/controlplane"
	"github.com/sagebox/sagebox/internal/logstore"
	"github.com/sagebox/sagebox/internal/metastore"
)

// fakeRunner is a controlplane.Runner whose behaviour tests set with
// function fields (through set, as requests run on other goroutines); it
// records the calls.
type fakeRunner struct {
	SubmitFunc func(ctx context.Context, job string) error
	StopFunc   func(ctx context.Context, job string) error

	mu        sync.Mutex
	submitted []string
	stopped   []string
}

var _ controlplane.Runner = (*fakeRunner)(nil)

// set changes the fake's fields under its lock.
func (f *fakeRunner) set(fn func(*fakeRunner)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeRunner) Submit(ctx context.Context, job string) error {
	f.mu.Lock()
	f.submitted = append(f.submitted, job)
	fn := f.SubmitFunc
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, job)
	}
	return nil
}

func (f *fakeRunner) Stop(ctx context.Context, job string) error {
	f.mu.Lock()
	f.stopped = append(f.stopped, job)
	fn := f.StopFunc
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, job)
	}
	return nil
}

// calls returns the jobs submitted and stopped so far.
func (f *fakeRunner) calls() (submitted, stopped []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.submitted), slices.Clone(f.stopped)
}

// fakeHosting is a controlplane.Hosting that records its calls. With
// autoPromote, Deploy promotes the endpoint's pending deployment at once
// (as hosting does when every instance answers /ping), filling the
// variants' runtime summaries; Delete removes the record. ReserveErr, when
// set, refuses every reservation.
type fakeHosting struct {
	db    *metastore.DB
	clock *testClock

	mu          sync.Mutex
	autoPromote bool
	// promoteAfter, when set, promotes that long after Deploy returned.
	promoteAfter time.Duration
	ReserveErr   error
	DeployErr    error
	// OnReserve runs inside Reserve (outside the lock), e.g. to simulate a
	// concurrent request.
	OnReserve func()
	reserved  []*sagebox.Deployment
	released  int
	deployed  []string
	deleted   []string
}

var _ controlplane.Hosting = (*fakeHosting)(nil)

func (f *fakeHosting) set(fn func(*fakeHosting)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeHosting) Reserve(_ context.Context, _ string, dep *sagebox.Deployment) (func(), error) {
	f.mu.Lock()
	hook := f.OnReserve
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ReserveErr != nil {
		return nil, f.ReserveErr
	}
	f.reserved = append(f.reserved, dep)
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.released++
			f.mu.Unlock()
		})
	}, nil
}

func (f *fakeHosting) Deploy(ctx context.Context, endpoint string) error {
	f.mu.Lock()
	f.deployed = append(f.deployed, endpoint)
	promote, deployErr, after := f.autoPromote, f.DeployErr, f.promoteAfter
	f.mu.Unlock()
	if deployErr != nil {
		return deployErr
	}
	if after > 0 {
		// The test may be over by then; the error is of no interest.
		time.AfterFunc(after, func() { _ = f.promote(context.Background(), endpoint) })
		return nil
	}
	if promote {
		return f.promote(ctx, endpoint)
	}
	return nil
}

// promote does what hosting does once the pending deployment serves.
func (f *fakeHosting) promote(ctx context.Context, endpoint string) error {
	_, err := f.db.UpdateEndpoint(ctx, endpoint, func(e *sagebox.Endpoint) error {
		if e.Internal.Pending == nil {
			return nil
		}
		if e.Promote(f.clock.Now(), e.Internal.Pending.Generation) {
			e.ProductionVariants = nil
			for _, v := range e.Internal.Current.Variants {
				e.ProductionVariants = append(e.ProductionVariants, sagebox.ProductionVariantSummary{
					VariantName: v.VariantName, CurrentWeight: v.Weight, DesiredWeight: v.Weight,
					CurrentInstanceCount: v.InstanceCount, DesiredInstanceCount: v.InstanceCount,
				})
			}
		}
		return nil
	})
	return err
}

func (f *fakeHosting) Delete(ctx context.Context, endpoint string) error {
	f.mu.Lock()
	f.deleted = append(f.deleted, endpoint)
	f.mu.Unlock()
	return f.db.DeleteEndpoint(ctx, endpoint)
}

// calls returns what the fake saw so far.
func (f *fakeHosting) calls() (reserved []*sagebox.Deployment, released int, deployed, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reserved), f.released, slices.Clone(f.deployed), slices.Clone(f.deleted)
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a Handler on fresh stores behind an httptest server.
type env struct {
	jobs    *metastore.DB
	logs    *logstore.Store
	runner  *fakeRunner
	hosting *fakeHosting
	clock   *testClock
	srv     *httptest.Server
}

// startTime is the clock's initial reading in every test.
func startTime() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &testClock{now: startTime()}
	jobs, err := metastore.Open(ctx, filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	logs, err := logstore.Open(ctx, filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	logs.Now = clock.Now
	e := &env{jobs: jobs, logs: logs, runner: &fakeRunner{}, hosting: &fakeHosting{db: jobs, clock: clock}, clock: clock}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := controlplane.New(controlplane.Config{Now: clock.Now}, jobs, logs, e.runner, e.hosting, logger)
	e.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		e.srv.Close()
		logs.Close()
		jobs.Close()
	})
	return e
}

// response is a decoded reply.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic map.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// errorOf returns the __type and message of an error reply.
func (r response) errorOf(t testing.TB) (code, message string) {
	t.Helper()
	m := r.json(t)
	code, _ = m["__type"].(string)
	message, _ = m["message"].(string)
	return code, message
}

// call posts body (a string or a value to marshal) to target.
func (e *env) call(t testing.TB, target string, body any) response {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: out}
}

// ok calls target and fails the test unless the reply is 200; it returns
// the decoded body.
func (e *env) ok(t testing.TB, target string, body any) map[string]any {
	t.Helper()
	r := e.call(t, target, body)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", target, r.status, r.body)
	}
	return r.json(t)
}

// validJob returns a CreateTrainingJob request as the SageMaker Python SDK
// sends it for a PyTorch estimator.
func validJob(name string) map[string]any {
	return map[string]any{
		"TrainingJobName": name,
		"AlgorithmSpecification": map[string]any{
			"TrainingImage":                    "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311",
			"TrainingInputMode":                "File",
			"EnableSageMakerMetricsTimeSeries": true,
		},
		"RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
		"HyperParameters": map[string]any{
			"epochs":                        "1",
			"sagemaker_program":             `"train.py"`,
			"sagemaker_submit_directory":    `"s3://bucket/job/source/sourcedir.tar.gz"`,
			"sagemaker_container_log_level": "20",
			"sagemaker_job_name":            `"` + name + `"`,
			"sagemaker_region":              `"us-east-1"`,
		},
		"InputDataConfig": []any{map[string]any{
			"ChannelName": "training",
			"DataSource": map[string]any{"S3DataSource": map[string]any{
				"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/data", "S3DataDistributionType": "FullyReplicated",
			}},
		}},
		"OutputDataConfig":  map[string]any{"S3OutputPath": "s3://bucket/"},
		"ResourceConfig":    map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
		"StoppingCondition": map[string]any{"MaxRuntimeInSeconds": 86400},
		"DebugHookConfig":   map[string]any{"S3OutputPath": "s3://bucket/", "CollectionConfigurations": []any{}},
		"ProfilerConfig":    map[string]any{"S3OutputPath": "s3://bucket/", "DisableProfiler": false},
	}
}
