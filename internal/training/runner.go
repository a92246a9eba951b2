// Package training is the lifecycle of SageMaker training jobs, the same
// whatever runs the hosts: the phases and status transitions (on
// sagebox.TrainingJob), the outcome rules across hosts (the first failure
// stops the others), StopTrainingJob and MaxRuntimeInSeconds (SIGTERM to
// every host, StopGrace, SIGKILL), recovery after a restart of the server,
// FailureReason texts, metrics matched in the logs, and the logs streamed
// to CloudWatch-shaped streams. What depends on where the hosts run (their
// /opt/ml trees, processes, staging, artifacts) is a driver.Driver's: the
// local driver (internal/training/local) runs them on this machine.
//
// The contract a script sees (paths, config files, SM_* variables, argv,
// failure texts) is internal/toolkit's.
package training

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// JobStore is where training jobs live (the metadata store implements it).
type JobStore interface {
	TrainingJob(ctx context.Context, name string) (*sagebox.TrainingJob, error)
	// UpdateTrainingJob is a transactional read-modify-write: fn sees the
	// current job and changes it in place; an error from fn aborts.
	UpdateTrainingJob(ctx context.Context, name string, fn func(*sagebox.TrainingJob) error) (*sagebox.TrainingJob, error)
	TrainingJobsWithStatus(ctx context.Context, statuses ...string) ([]*sagebox.TrainingJob, error)
	AddMetrics(ctx context.Context, job string, points []sagebox.MetricPoint) error
}

// LogSink receives log events (the log store implements it). Append creates
// the group and stream on first use.
type LogSink interface {
	Append(ctx context.Context, group, stream string, events []sagebox.LogEvent) error
}

// Capacity is the machine's budget that a job's hosts draw on
// (*capacity.Pool implements it). Nil means no limit.
type Capacity interface {
	Reserve(ctx context.Context, owner string, want capacity.Resources) error
	Claim(owner string, want capacity.Resources)
	Release(owner string)
}

// Config configures a Runner.
type Config struct {
	// DataDir is sagebox's data directory; the runner keeps each job's
	// state (log offsets, the outcome, the driver's records) in
	// DataDir/jobs/<job>/.sagebox/.
	DataDir string
	// Driver runs the hosts.
	Driver driver.Driver
	// Capacity, if set, is what a job's hosts must fit in before they are
	// staged: a job waits in Starting (in arrival order) until they do.
	// HostResources is what one host takes.
	Capacity      Capacity
	HostResources capacity.Resources
	// Region is the default AWS region for scripts.
	Region string
	// StopGrace is how long a stopped job's processes get between SIGTERM
	// and SIGKILL. Zero means DefaultStopGrace. (SageMaker waits 120s.)
	StopGrace time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// PollInterval is how often running jobs' logs and ends are read.
	// Zero means 200ms.
	PollInterval time.Duration
	// CheckpointInterval is how often checkpoint directories are synced to
	// S3 while a job runs. Zero means 5s.
	CheckpointInterval time.Duration
}

// DefaultStopGrace is the default time between SIGTERM and SIGKILL. It is
// shorter than SageMaker's 120s because local jobs are usually stopped by
// someone waiting at a terminal; checkpointing handlers get 30s.
const DefaultStopGrace = 30 * time.Second

// Runner runs training jobs on this machine. It is safe for concurrent use.
type Runner struct {
	cfg    Config
	driver driver.Driver
	jobs   JobStore
	logs   LogSink
	log    *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	active map[string]*jobRun
	closed bool
}

// NewRunner returns a Runner. It starts nothing: call Recover at server
// start, then Submit for new jobs.
func NewRunner(cfg Config, jobs JobStore, logs LogSink, logger *slog.Logger) *Runner {
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 5 * time.Second
	}
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{
		cfg: cfg, driver: cfg.Driver, jobs: jobs, logs: logs, log: logger,
		ctx: ctx, cancel: cancel, active: map[string]*jobRun{},
	}
}

// ErrClosed is returned by a Runner after Close.
var ErrClosed = errors.New("training runner closed")

// ErrJobActive is returned by Submit for a job this runner already runs.
var ErrJobActive = errors.New("training job is already running")

// Submit starts the stored job name, which the control plane has created
// as InProgress/Starting, and returns at once; the job runs in the
// background and reports through the JobStore.
func (r *Runner) Submit(ctx context.Context, jobName string) error {
	job, err := r.jobs.TrainingJob(ctx, jobName)
	if err != nil {
		return fmt.Errorf("submit %s: %w", jobName, err)
	}
	if sagebox.Terminal(job.TrainingJobStatus) {
		return fmt.Errorf("submit %s: job is already %s", jobName, job.TrainingJobStatus)
	}
	return r.start(jobName, func(ctx context.Context, jr *jobRun) { jr.runFromStart(ctx) })
}

// start registers a jobRun for name and runs body in the background.
func (r *Runner) start(name string, body func(context.Context, *jobRun)) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`+"\x00") {
		return fmt.Errorf("invalid training job name %q", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.active[name] != nil {
		return fmt.Errorf("%s: %w", name, ErrJobActive)
	}
	jr := newJobRun(r, name)
	r.active[name] = jr
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.active, name)
			r.mu.Unlock()
		}()
		body(r.ctx, jr)
	}()
	return nil
}

// Stop stops a job: the control plane has already set it Stopping. Its
// processes get SIGTERM (the whole process group), StopGrace, then SIGKILL;
// artifacts are uploaded and the job ends Stopped. A job that is still
// staging stops there. Stop returns at once.
func (r *Runner) Stop(ctx context.Context, jobName string) error {
	r.mu.Lock()
	jr := r.active[jobName]
	r.mu.Unlock()
	if jr != nil {
		jr.requestStop(sagebox.SecondaryStopped)
		return nil
	}
	// Nobody here runs it (a job left over from before a restart that
	// Recover has not seen yet): adopt it, which honours Stopping.
	job, err := r.jobs.TrainingJob(ctx, jobName)
	if err != nil {
		return fmt.Errorf("stop %s: %w", jobName, err)
	}
	if sagebox.Terminal(job.TrainingJobStatus) {
		return nil
	}
	err = r.start(jobName, func(ctx context.Context, jr *jobRun) { jr.resume(ctx) })
	if errors.Is(err, ErrJobActive) {
		return r.Stop(ctx, jobName) // lost a race with Submit or Recover
	}
	return err
}

// Close stops watching jobs and returns when every background goroutine
// has ended (or ctx is done). It deliberately leaves the jobs' processes
// running: they are detached from the server through the shim, keep
// writing their output, and are re-adopted by Recover when the server
// starts again, so restarting or upgrading the server never kills
// training. Jobs caught staging or uploading are redone by Recover.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close training runner: %w", ctx.Err())
	}
}

func (r *Runner) now() time.Time { return r.cfg.Now() }

func (r *Runner) jobDir(job string) string { return filepath.Join(r.cfg.DataDir, "jobs", job) }

// stateDir holds the runner's and the shim's files for a job, beside (not
// inside) the hosts' workspaces.
func (r *Runner) stateDir(job string) string { return filepath.Join(r.jobDir(job), ".sagebox") }
