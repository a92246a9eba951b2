package training

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// jobRun is one job while this runner supervises it.
type jobRun struct {
	r    *Runner
	name string
	log  *slog.Logger

	mu         sync.Mutex
	stopReason string // SecondaryStopped or SecondaryMaxRuntimeExceeded, once requested
	stopCh     chan struct{}
	cancelPrep context.CancelFunc
	wake       chan struct{}

	spec          *toolkit.Spec
	hosts         []*hostRun
	metrics       *toolkit.MetricMatcher
	trainingStart time.Time
	ckpts         *staging.Checkpoints
	ckptsDone     bool
	gpus          []string // CUDA_VISIBLE_DEVICES entries the job holds
}

func newJobRun(r *Runner, name string) *jobRun {
	return &jobRun{
		r: r, name: name, log: r.log.With("job", name),
		stopCh: make(chan struct{}), wake: make(chan struct{}, 1),
		metrics: &toolkit.MetricMatcher{},
	}
}

// requestStop stops the job for reason; the first request wins.
func (jr *jobRun) requestStop(reason string) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if jr.stopReason != "" {
		return
	}
	jr.stopReason = reason
	close(jr.stopCh)
	if jr.cancelPrep != nil {
		jr.cancelPrep()
	}
}

func (jr *jobRun) stopRequested() string {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return jr.stopReason
}

// poke wakes the supervise loop early (a shim exited).
func (jr *jobRun) poke() {
	select {
	case jr.wake <- struct{}{}:
	default:
	}
}

// runFromStart runs a job from staging to its end.
func (jr *jobRun) runFromStart(ctx context.Context) {
	job, err := jr.r.jobs.TrainingJob(ctx, jr.name)
	if err != nil {
		jr.abort(ctx, fmt.Errorf("load job: %w", err))
		return
	}
	if job.TrainingJobStatus == sagebox.StatusStopping {
		jr.requestStop(job.StopReason())
	}
	if err := jr.init(job); err != nil {
		jr.end(ctx, failedOutcome(failureReason(err), false))
		return
	}
	job, err = jr.r.transition(ctx, jr.name, sagebox.SecondaryDownloading, msgDownloading, func(j *sagebox.TrainingJob) {
		if j.TrainingStartTime == nil {
			j.TrainingStartTime = sagebox.NewTime(jr.r.now())
		}
	})
	if err != nil {
		jr.abort(ctx, err)
		return
	}
	jr.setupHosts(ctx, job)
	// Staging and pip stop as soon as the job is stopped.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jr.mu.Lock()
	jr.cancelPrep = cancel
	if jr.stopReason != "" {
		cancel()
	}
	jr.mu.Unlock()
	if err := jr.prepare(sctx); err != nil {
		jr.failBeforeLaunch(ctx, err)
		return
	}
	job, err = jr.r.transition(ctx, jr.name, sagebox.SecondaryTraining, msgTraining, nil)
	if err != nil {
		jr.abort(ctx, err)
		return
	}
	jr.trainingStart = trainingStartOf(job, jr.r.now())
	python, kind, err := jr.install(sctx)
	if err == nil {
		err = jr.launchAll(sctx, python, kind)
	}
	if err != nil {
		jr.failBeforeLaunch(ctx, err)
		return
	}
	if o, ok := jr.supervise(ctx); ok {
		jr.end(ctx, o)
	}
}

// init decodes the job and compiles its metric definitions.
func (jr *jobRun) init(job *sagebox.TrainingJob) error {
	spec, err := toolkit.NewSpec(job, jr.r.cfg.Region)
	if err != nil {
		return err
	}
	jr.spec = spec
	m, bad := toolkit.CompileMetrics(spec.Metrics)
	jr.metrics = m
	for _, b := range bad {
		jr.log.Warn("metric definition skipped", "detail", b)
	}
	return nil
}

// failBeforeLaunch ends a job whose processes never all started.
func (jr *jobRun) failBeforeLaunch(ctx context.Context, err error) {
	launched := false
	for _, h := range jr.hosts {
		launched = launched || h.launched
	}
	if launched {
		// Some hosts run already: let supervise stop them and fail the job.
		for _, h := range jr.hosts {
			if !h.launched && !h.done {
				h.done, h.failure = true, failureReason(err)
				h.exit = exitStatus{ExitCode: 1, EndedAt: time.Time{}}
			}
		}
		if o, ok := jr.supervise(ctx); ok {
			jr.end(ctx, o)
		}
		return
	}
	switch {
	case jr.stopRequested() != "":
		jr.end(ctx, stoppedOutcome(jr.stopRequested(), false, jr.maxRuntime()))
	case ctx.Err() != nil:
		return // the runner is closing; Recover starts the job again
	default:
		jr.log.Info("job failed before launch", "err", err)
		jr.end(ctx, failedOutcome(failureReason(err), false))
	}
}

// abort handles an error that prevents even recording a failure.
func (jr *jobRun) abort(ctx context.Context, err error) {
	switch {
	case ctx.Err() != nil, errors.Is(err, errTerminal):
		return
	}
	jr.log.Error("training job aborted", "err", err)
	_, ferr := jr.r.finalize(context.WithoutCancel(ctx), jr.name, failedOutcome(failureReason(err), false), nil)
	if ferr != nil && !errors.Is(ferr, errTerminal) {
		jr.log.Error("could not record the failure", "err", ferr)
	}
}

func (jr *jobRun) maxRuntime() time.Duration {
	if jr.spec == nil {
		return 0
	}
	return jr.spec.MaxRuntime
}

// setupHosts computes each host's paths and log stream (no disk access
// beyond reading saved tail state).
func (jr *jobRun) setupHosts(ctx context.Context, job *sagebox.TrainingJob) {
	s := jr.spec
	start := jr.r.now()
	if job.TrainingStartTime != nil {
		start = job.TrainingStartTime.Time
	}
	jr.gpus = jr.reserveGPUs(len(s.Hosts))
	jr.hosts = nil
	for i, name := range s.Hosts {
		info := toolkit.Host{Index: i, Name: name, Workspace: toolkit.Workspace{Root: filepath.Join(jr.r.jobDir(jr.name), name)}}
		info.NumGPUs, info.CUDADevices = gpuShare(jr.gpus, i, len(s.Hosts))
		h := &hostRun{
			info:     info,
			stateDir: filepath.Join(jr.r.stateDir(jr.name), name),
			stream:   fmt.Sprintf("%s/%s-%d", jr.name, name, start.Unix()),
			log:      jr.log.With("host", name),
		}
		h.tail = &tailer{logPath: h.path(fileOutput), statePath: h.path(fileTail)}
		jr.hosts = append(jr.hosts, h)
	}
}

// fileGPUs records the GPUs a job's processes were started with, so that
// a recovered job claims the same ones.
const fileGPUs = "gpus.json"

func (jr *jobRun) gpuOwner() string { return "training-job/" + jr.name }

// reserveGPUs holds the job's GPUs: every free one, split evenly between
// its n hosts (at least one each, shared when none is free), or, for a job
// that already ran here (a recovery), the ones it recorded.
func (jr *jobRun) reserveGPUs(n int) []string {
	a := jr.r.cfg.GPUs
	if a == nil {
		return nil
	}
	var had []string
	if err := readJSON(filepath.Join(jr.r.stateDir(jr.name), fileGPUs), &had); err == nil {
		return a.Claim(jr.gpuOwner(), had)
	}
	a.Release(jr.gpuOwner()) // a second setup of the same run starts over
	return a.ReserveFree(jr.gpuOwner(), n, n)
}

// gpuShare splits the job's GPUs between its simulated hosts, in equal
// disjoint parts: n hosts on one machine must not all claim every GPU.
// With fewer GPUs than hosts, each host gets one, round-robin. Hosts get
// CUDA_VISIBLE_DEVICES whenever there are GPUs, so a job sees only its own.
func gpuShare(ids []string, host, n int) (count int, visible string) {
	if len(ids) == 0 {
		return 0, ""
	}
	per := len(ids) / max(n, 1)
	if per == 0 {
		return 1, ids[host%len(ids)]
	}
	return per, strings.Join(ids[host*per:(host+1)*per], ",")
}

// prepare builds every host's workspace and state directory: config files,
// channels, source directory, checkpoints. A stop cancels it.
func (jr *jobRun) prepare(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := jr.spec
	if err := os.RemoveAll(jr.r.stateDir(jr.name)); err != nil {
		return fmt.Errorf("clear job state: %w", err)
	}
	var names []string
	for _, c := range s.Channels {
		names = append(names, c.Name)
	}
	for _, h := range jr.hosts {
		if err := h.info.Workspace.Create(names); err != nil {
			return err
		}
		if err := os.MkdirAll(h.stateDir, 0o755); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		h.tail.st = tailState{}
		cf, err := s.ConfigFiles(h.info.Name)
		if err != nil {
			return err
		}
		if err := cf.Write(h.info.Workspace); err != nil {
			return err
		}
	}
	if jr.r.cfg.GPUs != nil {
		if err := writeJSONAtomic(filepath.Join(jr.r.stateDir(jr.name), fileGPUs), append([]string{}, jr.gpus...)); err != nil {
			return fmt.Errorf("record the job's GPUs: %w", err)
		}
	}
	for _, c := range s.Channels {
		if err := jr.stageChannel(ctx, c); err != nil {
			return err
		}
	}
	for _, h := range jr.hosts {
		if err := jr.r.stageSourceDir(ctx, s, h.info.Workspace); err != nil {
			return err
		}
	}
	return jr.downloadCheckpoints(ctx)
}

// launchAll starts every host's process through the shim.
func (jr *jobRun) launchAll(ctx context.Context, python string, kind toolkit.EntryKind) error {
	torchVer := jr.r.probe(ctx)
	port := toolkit.FreePort()
	base := toolkit.BaseEnv(jr.r.environ())
	// Only scripts that run once per host and find each other by name need
	// the names to resolve; torchrun and mpirun rendezvous on 127.0.0.1, and
	// torch's c10d store cannot start its server under nss_wrapper.
	nssWrapper := ""
	if jr.spec.Dist == toolkit.DistNone && len(jr.spec.Hosts) > 1 {
		nssWrapper = toolkit.FindNSSWrapper()
	}
	for _, h := range jr.hosts {
		if err := ctx.Err(); err != nil {
			return err
		}
		argv, passive, err := jr.spec.Command(kind, python, h.info, port, h.stateDir)
		if err != nil {
			return err
		}
		if passive {
			h.rec = launchRecord{Passive: true, StartedAt: jr.r.now()}
			h.launched = true
			if err := writeJSONAtomic(h.path(fileShim), h.rec); err != nil {
				return err
			}
			jr.note(ctx, []*hostRun{h}, "%s is an MPI worker: mpirun on %s starts its processes", h.info.Name, jr.spec.Hosts[0])
			continue
		}
		cf, err := jr.spec.ConfigFiles(h.info.Name)
		if err != nil {
			return err
		}
		hostsFile := ""
		if nssWrapper != "" {
			if hostsFile, err = toolkit.WriteHostsFile(h.stateDir, jr.spec.Hosts); err != nil {
				return fmt.Errorf("write hosts file: %w", err)
			}
		}
		pe := toolkit.Platform{
			Base: base, Endpoint: jr.r.cfg.SagemakerEndpoint, MasterPort: port,
			RuntimeDir: jr.r.cfg.RuntimeDir, TorchVersion: torchVer, NumCPUs: numCPUs(),
			NSSWrapper: nssWrapper, HostsFile: hostsFile,
		}
		if jr.r.cfg.JobCredentials != nil {
			pe.AccessKeyID, pe.SecretKey = jr.r.cfg.JobCredentials(jr.spec.Name)
		}
		env := jr.spec.Env(h.info, cf, pe)
		if err := jr.r.startShim(ctx, h, argv, toolkit.EnvironList(env), jr.poke); err != nil {
			return err
		}
		h.log.Info("process started", "pid", h.rec.ShimPID, "argv", toolkit.ShellJoin(argv))
	}
	return nil
}
