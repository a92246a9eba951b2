package training

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// Recover runs at server start. For every job left InProgress or
// Stopping it decides, from the job's status and the files in its state
// directory:
//
//   - Starting/Downloading (or Training before any process started):
//     stage again from scratch (or end Stopped if it is being stopped);
//   - Uploading: redo the uploads and finish with the recorded outcome;
//   - Training/Stopping with processes: for each host, a shim that is
//     still alive (/proc/<pid> exists, is not a zombie, and its command
//     line names the host's state directory) is re-adopted: tailing
//     resumes at the saved offset, the MaxRuntime deadline is kept, and a
//     Stopping job's stop is re-issued; a host whose shim is gone but left
//     exit.json is finished normally; a host gone without an exit status
//     fails the job with "InternalServerError: sagebox server restarted and
//     the job's process (pid N) was gone without an exit status".
//
// No job stays InProgress forever. Recover returns once every job is
// being handled; the work goes on in the background.
func (r *Runner) Recover(ctx context.Context) error {
	jobs, err := r.jobs.TrainingJobsWithStatus(ctx, sagebox.StatusInProgress, sagebox.StatusStopping)
	if err != nil {
		return fmt.Errorf("recover training jobs: %w", err)
	}
	var errs []error
	for _, job := range jobs {
		name := job.TrainingJobName
		err := r.start(name, func(ctx context.Context, jr *jobRun) { jr.resume(ctx) })
		if err != nil && !errors.Is(err, ErrJobActive) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resume takes over a job this runner did not start.
func (jr *jobRun) resume(ctx context.Context) {
	job, err := jr.r.jobs.TrainingJob(ctx, jr.name)
	if err != nil {
		jr.abort(ctx, fmt.Errorf("load job: %w", err))
		return
	}
	if sagebox.Terminal(job.TrainingJobStatus) {
		return
	}
	if job.TrainingJobStatus == sagebox.StatusStopping {
		jr.requestStop(job.StopReason())
	}
	if err := jr.init(job); err != nil {
		jr.end(ctx, failedOutcome(failureReason(err), false))
		return
	}
	jr.log.Info("recovering training job", "status", job.TrainingJobStatus, "secondary", job.SecondaryStatus)
	jr.setupHosts(ctx, job)
	if c := jr.r.cfg.Capacity; c != nil && job.SecondaryStatus != sagebox.SecondaryStarting {
		// Past admission before the restart: it holds its place even if
		// the budget has shrunk meanwhile.
		c.Claim(jr.capacityOwner(), jr.r.hostsResources(len(jr.spec.Hosts)))
	}
	jr.trainingStart = trainingStartOf(job, jr.r.now())

	switch job.SecondaryStatus {
	case sagebox.SecondaryStarting, sagebox.SecondaryDownloading, "", "Pending":
		jr.restage(ctx)
		return
	case sagebox.SecondaryUploading:
		var o outcome
		if err := statefile.ReadJSON(filepath.Join(jr.r.stateDir(jr.name), fileOutcome), &o); err != nil {
			o = failedOutcome("InternalServerError: sagebox server restarted while uploading and the job's outcome was lost", true)
		}
		jr.loadHostState(ctx)
		jr.end(ctx, o)
		return
	}

	if !jr.loadHostState(ctx) {
		jr.restage(ctx) // nothing was started yet
		return
	}
	for _, h := range jr.hosts {
		switch {
		case !h.launched:
			h.done = true
			h.failure = "InternalServerError: sagebox server restarted before the job's process on " + h.name + " was started"
		case h.adoptErr != nil:
			// Never signalled: whatever the state names may not be ours.
			h.done = true
			h.failure = "InternalServerError: sagebox server restarted and the state of the job's process on " + h.name + " could not be re-adopted: " + h.adoptErr.Error()
		case h.passive():
		case h.task != nil:
			h.log.Info("re-adopted task", "task", h.task.ID(), "offset", h.tail.st.Offset)
		}
	}
	if o, ok := jr.supervise(ctx); ok {
		jr.end(ctx, o)
	}
}

// restage starts the job over from staging, or ends it Stopped if it is
// being stopped.
func (jr *jobRun) restage(ctx context.Context) {
	if reason := jr.stopRequested(); reason != "" {
		jr.end(ctx, stoppedOutcome(reason, false, jr.maxRuntime()))
		return
	}
	jr.runFromStart(ctx)
}

// loadHostState reads each host's tail state, has the driver re-attach
// to its task, and reports whether any host was launched. A host whose
// task never started counts as not launched.
func (jr *jobRun) loadHostState(ctx context.Context) bool {
	any := false
	for _, h := range jr.hosts {
		if t, err := openTailer(h.stateDir); err == nil {
			h.tail = t
		} else {
			h.log.Warn("unreadable tail state; the log restarts from the beginning", "err", err)
		}
		t, err := jr.r.driver.Recover(ctx, jr.job, h.index)
		switch {
		case errors.Is(err, driver.ErrNotStarted):
			h.log.Info("the process was never started")
			continue
		case err != nil:
			h.launched, h.adoptErr, any = true, err, true
			continue
		}
		jr.attach(h, t)
		any = true
	}
	return any
}

// trainingStartOf is when the job entered Training (the MaxRuntime clock).
func trainingStartOf(job *sagebox.TrainingJob, fallback time.Time) time.Time {
	for i := len(job.SecondaryStatusTransitions) - 1; i >= 0; i-- {
		t := job.SecondaryStatusTransitions[i]
		if t.Status == sagebox.SecondaryTraining && t.StartTime != nil {
			return t.StartTime.Time
		}
	}
	return fallback
}
