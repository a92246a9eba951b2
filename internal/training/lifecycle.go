package training

import (
	"context"
	"errors"
	"time"

	"github.com/sagebox/sagebox"
)

// Job lifecycle as the runner drives it (TrainingJobStatus/SecondaryStatus;
// every arrow appends a SecondaryStatusTransition with a StatusMessage,
// closes the previous one, and sets LastModifiedTime):
//
//	InProgress/Starting          (control plane: CreateTrainingJob)
//	   │ Submit
//	   ▼
//	InProgress/Downloading       workspaces, config files, channels, sourcedir, checkpoints
//	   │                         TrainingStartTime; a ClientError here ─▶ Failed (nothing uploaded)
//	   ▼
//	InProgress/Training          requirements.txt, then the hosts' processes through the shim
//	   │  all exit 0 ───────────────────────────────┐
//	   │  one exits ≠ 0 (others are stopped) ───────┤
//	   │  StopTrainingJob:                          │
//	   │    Stopping/Stopping (control plane)       │
//	   │  MaxRuntimeInSeconds:                      │
//	   │    Stopping/MaxRuntimeExceeded (runner)    │
//	   │    └ SIGTERM group, StopGrace, SIGKILL ────┤
//	   ▼                                            ▼
//	InProgress|Stopping/Uploading  model.tar.gz, output.tar.gz, final checkpoint sync
//	   │                           (also after a failure or a stop)
//	   ├─▶ Completed/Completed
//	   ├─▶ Failed/Failed                 FailureReason set
//	   └─▶ Stopped/Stopped | Stopped/MaxRuntimeExceeded
//
// TrainingEndTime, TrainingTimeInSeconds and BillableTimeInSeconds
// (training seconds × instance count) are set with the terminal status.

// The status messages and the rules of every transition are the root
// type's (sagebox.TrainingJob.Advance, RequestStop, End): the runner and the
// control plane write one state machine.
const (
	msgDownloading = sagebox.MsgDownloading
	msgTraining    = sagebox.MsgTraining
	msgUploading   = sagebox.MsgUploading
	msgCompleted   = sagebox.MsgCompleted
	msgFailed      = sagebox.MsgFailed
	msgStopped     = sagebox.MsgStopped
)

// errTerminal aborts an update of a job that has already ended.
var errTerminal = sagebox.ErrJobEnded

// transition moves job to secondary (an InProgress phase), keeping
// TrainingJobStatus Stopping if the job is being stopped.
func (r *Runner) transition(ctx context.Context, job, secondary, message string, mutate func(*sagebox.TrainingJob)) (*sagebox.TrainingJob, error) {
	return r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		if err := j.Advance(secondary, message, r.now()); err != nil {
			return err
		}
		if mutate != nil {
			mutate(j)
		}
		return nil
	})
}

// markStopping records that the runner itself is stopping the job
// (MaxRuntimeInSeconds): Stopping/MaxRuntimeExceeded. A job the control
// plane is already stopping keeps its reason.
func (r *Runner) markStopping(ctx context.Context, job, reason, message string) error {
	_, err := r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		err := j.RequestStop(reason, message, r.now())
		if errors.Is(err, sagebox.ErrNotInProgress) {
			return nil
		}
		return err
	})
	return err
}

// finalize sets the terminal status with its times.
func (r *Runner) finalize(ctx context.Context, job string, o outcome, mutate func(*sagebox.TrainingJob)) (*sagebox.TrainingJob, error) {
	return r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		err := j.End(o.Outcome, r.now())
		if err != nil {
			return err
		}
		if mutate != nil {
			mutate(j)
		}
		return nil
	})
}

// outcome is how a job ended, decided before uploading and persisted so
// that a restart during the upload finishes it the same way.
type outcome struct {
	sagebox.Outcome
	// Launched says whether any process ran (only then are artifacts
	// uploaded).
	Launched bool `json:"launched"`
}

func failedOutcome(reason string, launched bool) outcome {
	return outcome{Outcome: sagebox.Outcome{Status: sagebox.StatusFailed, Secondary: sagebox.SecondaryFailed, Message: msgFailed, FailureReason: reason}, Launched: launched}
}

func stoppedOutcome(secondary string, launched bool, maxRuntime time.Duration) outcome {
	o := outcome{Outcome: sagebox.Outcome{Status: sagebox.StatusStopped, Secondary: secondary, Message: msgStopped}, Launched: launched}
	if secondary == sagebox.SecondaryMaxRuntimeExceeded {
		o.Message = "Training job stopped: it exceeded MaxRuntimeInSeconds (" + maxRuntime.String() + ")"
	}
	return o
}
