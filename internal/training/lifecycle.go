package training

import (
	"context"
	"errors"
	"math"
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

// Status messages, as SageMaker words them where it has one.
const (
	msgDownloading = "Downloading input data"
	msgTraining    = "Training image download completed. Training in progress."
	msgUploading   = "Uploading generated training model"
	msgCompleted   = "Training job completed"
	msgFailed      = "Training job failed"
	msgStopped     = "Training job stopped"
)

// errTerminal aborts an update of a job that has already ended.
var errTerminal = errors.New("training job already ended")

// transition moves job to secondary (an InProgress phase), keeping
// TrainingJobStatus Stopping if the job is being stopped. While a job is
// Stopping, the staging and training phases are not recorded: the stop
// path takes over.
func (r *Runner) transition(ctx context.Context, job, secondary, message string, mutate func(*sagebox.TrainingJob)) (*sagebox.TrainingJob, error) {
	return r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		if sagebox.Terminal(j.TrainingJobStatus) {
			return errTerminal
		}
		now := r.now()
		if j.TrainingJobStatus != sagebox.StatusStopping {
			j.TrainingJobStatus = sagebox.StatusInProgress
			appendTransition(j, secondary, message, now)
		} else if secondary == sagebox.SecondaryUploading {
			appendTransition(j, secondary, message, now)
		}
		j.LastModifiedTime = sagebox.NewTime(now)
		if mutate != nil {
			mutate(j)
		}
		return nil
	})
}

// markStopping records that the runner itself is stopping the job
// (MaxRuntimeInSeconds): Stopping/MaxRuntimeExceeded.
func (r *Runner) markStopping(ctx context.Context, job, secondary, message string) error {
	_, err := r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		if sagebox.Terminal(j.TrainingJobStatus) {
			return errTerminal
		}
		now := r.now()
		j.TrainingJobStatus = sagebox.StatusStopping
		appendTransition(j, secondary, message, now)
		j.LastModifiedTime = sagebox.NewTime(now)
		return nil
	})
	return err
}

// finalize sets the terminal status with its times.
func (r *Runner) finalize(ctx context.Context, job string, o outcome, mutate func(*sagebox.TrainingJob)) (*sagebox.TrainingJob, error) {
	return r.jobs.UpdateTrainingJob(ctx, job, func(j *sagebox.TrainingJob) error {
		if sagebox.Terminal(j.TrainingJobStatus) {
			return errTerminal
		}
		now := r.now()
		j.TrainingJobStatus = o.Status
		appendTransition(j, o.Secondary, o.Message, now)
		last := &j.SecondaryStatusTransitions[len(j.SecondaryStatusTransitions)-1]
		last.EndTime = last.StartTime
		j.LastModifiedTime = sagebox.NewTime(now)
		if o.FailureReason != "" {
			j.FailureReason = o.FailureReason
		}
		if j.TrainingStartTime != nil {
			j.TrainingEndTime = sagebox.NewTime(now)
			secs := int64(math.Ceil(now.Sub(j.TrainingStartTime.Time).Seconds()))
			secs = max(secs, 1)
			count := int64(1)
			if j.ResourceConfig != nil && j.ResourceConfig.InstanceCount > 0 {
				count = int64(j.ResourceConfig.InstanceCount)
			}
			billable := secs * count
			j.TrainingTimeInSeconds = &secs
			j.BillableTimeInSeconds = &billable
		}
		if mutate != nil {
			mutate(j)
		}
		return nil
	})
}

// appendTransition closes the current transition and opens secondary (a
// repeated status only updates the message).
func appendTransition(j *sagebox.TrainingJob, secondary, message string, now time.Time) {
	t := sagebox.NewTime(now)
	if n := len(j.SecondaryStatusTransitions); n > 0 {
		last := &j.SecondaryStatusTransitions[n-1]
		if last.Status == secondary && last.EndTime == nil {
			last.StatusMessage = message
			j.SecondaryStatus = secondary
			return
		}
		if last.EndTime == nil {
			last.EndTime = t
		}
	}
	j.SecondaryStatusTransitions = append(j.SecondaryStatusTransitions, sagebox.StatusTransition{
		Status: secondary, StartTime: t, StatusMessage: message,
	})
	j.SecondaryStatus = secondary
}

// outcome is how a job ended, decided before uploading and persisted so
// that a restart during the upload finishes it the same way.
type outcome struct {
	Status        string `json:"status"`
	Secondary     string `json:"secondary"`
	Message       string `json:"message"`
	FailureReason string `json:"failure_reason,omitempty"`
	// Launched says whether any process ran (only then are artifacts
	// uploaded).
	Launched bool `json:"launched"`
}

func failedOutcome(reason string, launched bool) outcome {
	return outcome{Status: sagebox.StatusFailed, Secondary: sagebox.SecondaryFailed, Message: msgFailed, FailureReason: reason, Launched: launched}
}

func stoppedOutcome(secondary string, launched bool, maxRuntime time.Duration) outcome {
	o := outcome{Status: sagebox.StatusStopped, Secondary: secondary, Message: msgStopped, Launched: launched}
	if secondary == sagebox.SecondaryMaxRuntimeExceeded {
		o.Message = "Training job stopped: it exceeded MaxRuntimeInSeconds (" + maxRuntime.String() + ")"
	}
	return o
}
