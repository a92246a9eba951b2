package training

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
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
	job           *driver.Job // what the driver sees of this run
	hosts         []*hostRun
	metrics       *toolkit.MetricMatcher
	trainingStart time.Time
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
	if !jr.admit(ctx) {
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
	err = jr.r.driver.Install(sctx, jr.job)
	if err == nil {
		err = jr.launchAll(sctx)
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
				h.exit = driver.Result{ExitCode: 1}
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

// setupHosts names the hosts and their log streams, and makes the
// driver's view of this run; the driver fills in where each host lives.
func (jr *jobRun) setupHosts(ctx context.Context, job *sagebox.TrainingJob) {
	s := jr.spec
	start := jr.r.now()
	if job.TrainingStartTime != nil {
		start = job.TrainingStartTime.Time
	}
	jr.job = &driver.Job{Name: jr.name, Spec: s, StateDir: jr.r.stateDir(jr.name)}
	jr.job.Notes = func(idx []int, msg string) {
		var hosts []*hostRun
		for _, i := range idx {
			if i >= 0 && i < len(jr.hosts) {
				hosts = append(hosts, jr.hosts[i])
			}
		}
		jr.note(ctx, hosts, "%s", msg)
	}
	jr.hosts = nil
	for i, name := range s.Hosts {
		jr.job.Hosts = append(jr.job.Hosts, toolkit.Host{Index: i, Name: name})
		h := &hostRun{
			index:    i,
			name:     name,
			stateDir: filepath.Join(jr.r.stateDir(jr.name), name),
			stream:   fmt.Sprintf("%s/%s-%d", jr.name, name, start.Unix()),
			log:      jr.log.With("host", name),
		}
		h.tail = &tailer{statePath: h.path(fileTail)}
		jr.hosts = append(jr.hosts, h)
	}
	jr.job.Output = &lineWriter{jr: jr, ctx: ctx, hosts: jr.hosts}
}

// codeDir is host i's code directory as its script sees it, for the
// traceback capture ("" until the driver placed the host).
func (jr *jobRun) codeDir(i int) string {
	if ws := jr.job.Hosts[i].Workspace; ws.Root != "" {
		return ws.CodeDir()
	}
	return ""
}

// capacityOwner is the job's name in the machine's budget.
func (jr *jobRun) capacityOwner() string { return "training-job/" + jr.name }

// admit waits until the job's hosts fit the machine's capacity (in
// arrival order, the job staying InProgress/Starting with a message that
// says so). false means the job ended (stopped while waiting) or the
// runner is closing.
func (jr *jobRun) admit(ctx context.Context) bool {
	c := jr.r.cfg.Capacity
	if c == nil {
		return true
	}
	want := jr.r.hostsResources(len(jr.spec.Hosts))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jr.mu.Lock()
	jr.cancelPrep = cancel
	stopped := jr.stopReason != ""
	jr.mu.Unlock()
	if stopped {
		cancel()
	}
	noted := make(chan struct{})
	go func() { // say why it waits, once it does
		defer close(noted)
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
			msg := fmt.Sprintf("Waiting for capacity: the job's %d instance(s) need %s, and other jobs or endpoints hold the machine's", len(jr.spec.Hosts), want)
			if _, err := jr.r.transition(context.WithoutCancel(ctx), jr.name, sagebox.SecondaryStarting, msg, nil); err != nil {
				jr.log.Warn("recording the wait for capacity failed", "err", err)
			}
		}
	}()
	err := c.Reserve(wctx, jr.capacityOwner(), want)
	cancel()
	<-noted
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
		return false // closing: Recover starts over
	case jr.stopRequested() != "":
		jr.end(ctx, stoppedOutcome(jr.stopRequested(), false, jr.maxRuntime()))
	default:
		jr.end(ctx, failedOutcome("ClientError: "+err.Error(), false))
	}
	return false
}

// hostsResources is what n hosts take from the machine's capacity.
func (r *Runner) hostsResources(n int) capacity.Resources {
	h := r.cfg.HostResources
	return capacity.Resources{Slots: h.Slots * n, MemoryMiB: h.MemoryMiB * int64(n), GPUs: h.GPUs * n}
}

// prepare clears the run's state and has the driver stage every host. A
// stop cancels it.
func (jr *jobRun) prepare(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.RemoveAll(jr.r.stateDir(jr.name)); err != nil {
		return fmt.Errorf("clear job state: %w", err)
	}
	for _, h := range jr.hosts {
		if err := os.MkdirAll(h.stateDir, 0o755); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		h.tail.st = tailState{}
	}
	return jr.r.driver.Prepare(ctx, jr.job)
}

// launchAll starts every host's task.
func (jr *jobRun) launchAll(ctx context.Context) error {
	for _, h := range jr.hosts {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := jr.r.driver.Start(ctx, jr.job, h.index)
		if err != nil {
			return err
		}
		jr.attach(h, t)
	}
	return nil
}

// attach makes t host h's task and wakes the supervise loop when it ends.
// The watcher is not tracked by Close: the task deliberately outlives the
// runner.
func (jr *jobRun) attach(h *hostRun, t driver.Task) {
	h.task, h.launched = t, true
	h.tail.out = t.Output()
	if done := t.Done(); done != nil {
		go func() { <-done; jr.poke() }()
	}
}
