// Package training runs SageMaker training jobs as local processes: it is
// the job lifecycle, with the contract (what a script sees: paths, config
// files, SM_* variables, argv, failure texts) in internal/toolkit.
//
// For each host algo-1..N of a job it builds an /opt/ml-shaped workspace
// under <DataDir>/jobs/<job>/<host>/, writes the three config files, stages
// the input channels (hard links out of the object store), unpacks the
// source directory, installs requirements.txt, sets every SM_* variable
// exactly as the toolkit encodes it, and launches the entry point (python,
// torchrun or mpirun) through a small shim process that outlives the server.
// It streams each host's output to the log store, matches metric regexes,
// turns failures into SageMaker's FailureReason texts, uploads model.tar.gz
// and output.tar.gz, syncs checkpoints, and drives the job's status through
// the JobStore. Stop and MaxRuntimeInSeconds send SIGTERM to the script's
// whole process group, wait, then SIGKILL. After a restart, Recover
// re-adopts running jobs or finishes them.
//
// The SageMaker facts this reproduces are in
// shared/reference/training-contract.md; deliberate differences are
// documented where they are made.
package training

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/staging"
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

// ObjectStore is the object store as the runner stages and collects
// through it: staging's neutral interface, which a remote S3 client can
// implement too. The on-disk store's adapter (staging/localobj) adds the
// local fast paths staging.Linker and staging.LocalFiles (hard links).
type ObjectStore = staging.Objects

// GPUs hands out the machine's GPUs across everything the server runs
// (*gpu.Allocator implements it). IDs are CUDA_VISIBLE_DEVICES entries.
type GPUs interface {
	// ReserveFree holds every free GPU for owner, rounded down to a
	// multiple of step and at least min (shared when too few are free),
	// and returns all owner holds.
	ReserveFree(owner string, min, step int) []string
	// Claim makes owner hold ids again (a recovered job), returning those
	// that still exist.
	Claim(owner string, ids []string) []string
	// Release gives back what owner holds.
	Release(owner string)
}

// Config configures a Runner.
type Config struct {
	// DataDir is sagebox's data directory; jobs live in DataDir/jobs/<job>/.
	DataDir string
	// Python is the interpreter for user code.
	Python pyruntime.Interpreter
	// RuntimeDir is the unpacked embedded Python runtime (pyruntime.Unpack);
	// it goes on PYTHONPATH after the code directory. May be empty.
	RuntimeDir string
	// SagemakerEndpoint is the server's URL. Scripts get it as
	// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3 and S3_ENDPOINT_URL with dummy
	// credentials, so boto3 in a script talks to sagebox.
	SagemakerEndpoint string
	// JobCredentials, if set, gives each job the access key its scripts
	// sign with (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), one the server's
	// verifier accepts. Nil means the dummy key "sagebox", which a server
	// without credentials accepts like any other.
	JobCredentials func(job string) (accessKeyID, secret string)
	// Region is the default AWS region for scripts.
	Region string
	// StopGrace is how long a stopped job's processes get between SIGTERM
	// and SIGKILL. Zero means DefaultStopGrace. (SageMaker waits 120s.)
	StopGrace time.Duration
	// ShimCommand is the argv prefix that runs the shim, such as
	// {os.Executable(), "exec-shim"}; "--dir <state dir> -- <argv...>" is
	// appended.
	ShimCommand []string
	// Now is the clock. Nil means time.Now.
	Now func() time.Time

	// PollInterval is how often running jobs' logs and exit files are
	// read. Zero means 200ms.
	PollInterval time.Duration
	// CheckpointInterval is how often checkpoint directories are synced to
	// S3 while a job runs. Zero means 5s.
	CheckpointInterval time.Duration
	// CopyChannels copies channel objects instead of hard-linking them, for
	// scripts that modify their input files in place.
	CopyChannels bool
	// GPUs hands out the machine's GPUs: each job's hosts get GPUs of
	// their own, released when the job ends. Nil means a machine without
	// GPUs.
	GPUs GPUs
	// Environ is the environment jobs inherit (filtered: the server's AWS
	// credentials and SM_* never leak). Nil means os.Environ().
	Environ []string
}

// DefaultStopGrace is the default time between SIGTERM and SIGKILL. It is
// shorter than SageMaker's 120s because local jobs are usually stopped by
// someone waiting at a terminal; checkpointing handlers get 30s.
const DefaultStopGrace = 30 * time.Second

// Runner runs training jobs on this machine. It is safe for concurrent use.
type Runner struct {
	cfg     Config
	jobs    JobStore
	objects ObjectStore
	logs    LogSink
	log     *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	active map[string]*jobRun
	closed bool

	probeOnce sync.Once
	torchVer  string
}

// NewRunner returns a Runner. It starts nothing: call Recover at server
// start, then Submit for new jobs.
func NewRunner(cfg Config, jobs JobStore, objects ObjectStore, logs LogSink, logger *slog.Logger) *Runner {
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
		cfg: cfg, jobs: jobs, objects: objects, logs: logs, log: logger,
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
		if r.cfg.GPUs != nil {
			defer r.cfg.GPUs.Release(jr.gpuOwner())
		}
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

func (r *Runner) environ() []string {
	if r.cfg.Environ != nil {
		return r.cfg.Environ
	}
	return os.Environ()
}

// probe finds, once, the interpreter's torch version
// (SM_DLC_TORCH_VERSION), without importing torch. GPUs come from
// Config.GPUs.
func (r *Runner) probe(ctx context.Context) (torchVersion string) {
	r.probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if r.cfg.Python.Path != "" {
			const code = "import importlib.util as u, re, os\n" +
				"s = u.find_spec('torch')\n" +
				"p = s and os.path.join(os.path.dirname(s.origin), 'version.py')\n" +
				"t = p and os.path.exists(p) and open(p).read()\n" +
				"m = t and re.search(r\"__version__\\s*=\\s*'([^']+)'\", t)\n" +
				"print(m.group(1) if m else '')\n"
			if out, err := exec.CommandContext(ctx, r.cfg.Python.Path, "-c", code).Output(); err == nil {
				r.torchVer = strings.TrimSpace(string(out))
			}
		}
	})
	return r.torchVer
}

func numCPUs() int { return runtime.NumCPU() }
