package sagebox

import (
	"errors"
	"math"
	"time"
	"unicode/utf8"
)

// A training job's status moves only through the methods in this file, so
// the control plane (creation, StopTrainingJob, a failed submit) and the
// runner (every later phase, MaxRuntimeInSeconds, the end) write one state
// machine with one set of rules:
//
//   - every change appends a SecondaryStatusTransition with a
//     StatusMessage, closes the previous one (EndTime = now) and sets
//     LastModifiedTime;
//   - a repeated SecondaryStatus whose transition is still open only
//     updates its message;
//   - while the job is Stopping, the staging and training phases are not
//     recorded (the stop path takes over), Uploading is;
//   - the terminal transition is closed at once (EndTime = StartTime);
//   - a FailureReason is cut to MaxFailureReason characters by
//     TruncateRunes where it is formed (runes, so a multi-byte character
//     is never split; an AlgorithmError keeps its prefix before the cut
//     text, as SageMaker's does);
//   - a job that has ended does not change again: ErrJobEnded.

// MaxFailureReason is the longest FailureReason SageMaker returns, in
// characters.
const MaxFailureReason = 1024

// Status messages of the transitions, as SageMaker words them where it
// has one.
const (
	MsgStarting    = "Preparing the instances for training"
	MsgDownloading = "Downloading input data"
	MsgTraining    = "Training image download completed. Training in progress."
	MsgUploading   = "Uploading generated training model"
	MsgStopping    = "Stopping the training job"
	MsgCompleted   = "Training job completed"
	MsgFailed      = "Training job failed"
	MsgStopped     = "Training job stopped"
)

// ErrJobEnded is returned for a change to a job that has already ended.
var ErrJobEnded = errors.New("training job already ended")

// ErrNotInProgress is returned by RequestStop for a job that is not
// InProgress (already stopping, or ended).
var ErrNotInProgress = errors.New("training job is not in progress")

// JobInternal is what sagebox keeps about a job beyond the API's shape. It
// is stored with the job but never returned by DescribeTrainingJob.
type JobInternal struct {
	// StopReason is the SecondaryStatus a stopped job ends with:
	// SecondaryStopped (StopTrainingJob) or SecondaryMaxRuntimeExceeded.
	// Empty until a stop is requested.
	StopReason string `json:"StopReason,omitempty"`
	// StopRequestedAt is when it was requested.
	StopRequestedAt *Time `json:"StopRequestedAt,omitempty"`
}

// Begin records a new job: InProgress/Starting at now.
func (j *TrainingJob) Begin(now time.Time) {
	t := NewTime(now)
	j.TrainingJobStatus = StatusInProgress
	j.SecondaryStatusTransitions = nil
	j.appendTransition(SecondaryStarting, MsgStarting, t)
	j.CreationTime = t
}

// Advance moves an InProgress job to the phase secondary (Downloading,
// Training, Uploading). While the job is Stopping only Uploading is
// recorded; the job stays Stopping.
func (j *TrainingJob) Advance(secondary, message string, now time.Time) error {
	if Terminal(j.TrainingJobStatus) {
		return ErrJobEnded
	}
	t := NewTime(now)
	switch {
	case j.TrainingJobStatus != StatusStopping:
		j.TrainingJobStatus = StatusInProgress
		j.appendTransition(secondary, message, t)
	case secondary == SecondaryUploading:
		j.appendTransition(secondary, message, t)
	}
	j.LastModifiedTime = t
	return nil
}

// RequestStop moves an InProgress job to Stopping. reason is the
// SecondaryStatus it will end with: SecondaryStopped for StopTrainingJob
// (the transition recorded now is Stopping), SecondaryMaxRuntimeExceeded
// when its run time is up (recorded as MaxRuntimeExceeded). The reason is
// kept in Internal, so nothing has to infer it from the transitions.
func (j *TrainingJob) RequestStop(reason, message string, now time.Time) error {
	if j.TrainingJobStatus != StatusInProgress {
		if Terminal(j.TrainingJobStatus) {
			return ErrJobEnded
		}
		return ErrNotInProgress
	}
	secondary := SecondaryStopping
	if reason == SecondaryMaxRuntimeExceeded {
		secondary = SecondaryMaxRuntimeExceeded
	} else {
		reason = SecondaryStopped
	}
	t := NewTime(now)
	j.TrainingJobStatus = StatusStopping
	j.appendTransition(secondary, message, t)
	j.Internal.StopReason = reason
	j.Internal.StopRequestedAt = t
	j.LastModifiedTime = t
	return nil
}

// StopReason is the SecondaryStatus a Stopping job ends with, or "" when
// no stop was requested.
func (j *TrainingJob) StopReason() string {
	if j.Internal.StopReason != "" {
		return j.Internal.StopReason
	}
	if j.TrainingJobStatus == StatusStopping {
		// A job stored before the reason was recorded.
		if j.SecondaryStatus == SecondaryMaxRuntimeExceeded {
			return SecondaryMaxRuntimeExceeded
		}
		return SecondaryStopped
	}
	return ""
}

// Outcome is how a job ends.
type Outcome struct {
	Status        string `json:"status"`    // Completed, Failed or Stopped
	Secondary     string `json:"secondary"` // its SecondaryStatus
	Message       string `json:"message"`
	FailureReason string `json:"failure_reason,omitempty"`
}

// End gives the job its terminal status at now: the closed terminal
// transition, FailureReason,
// TrainingEndTime, and TrainingTimeInSeconds and BillableTimeInSeconds
// (training seconds × instance count, at least 1 s) when training started.
func (j *TrainingJob) End(o Outcome, now time.Time) error {
	if Terminal(j.TrainingJobStatus) {
		return ErrJobEnded
	}
	t := NewTime(now)
	j.TrainingJobStatus = o.Status
	j.appendTransition(o.Secondary, o.Message, t)
	last := &j.SecondaryStatusTransitions[len(j.SecondaryStatusTransitions)-1]
	last.EndTime = last.StartTime
	j.LastModifiedTime = t
	if o.FailureReason != "" {
		j.FailureReason = o.FailureReason
	}
	j.TrainingEndTime = t
	if j.TrainingStartTime == nil {
		return nil
	}
	secs := max(int64(math.Ceil(now.Sub(j.TrainingStartTime.Time).Seconds())), 1)
	count := int64(1)
	if j.ResourceConfig != nil && j.ResourceConfig.InstanceCount > 0 {
		count = int64(j.ResourceConfig.InstanceCount)
	}
	billable := secs * count
	j.TrainingTimeInSeconds = &secs
	j.BillableTimeInSeconds = &billable
	return nil
}

// Fail ends the job Failed/Failed with reason.
func (j *TrainingJob) Fail(reason string, now time.Time) error {
	return j.End(Outcome{Status: StatusFailed, Secondary: SecondaryFailed, Message: MsgFailed, FailureReason: reason}, now)
}

// appendTransition closes the open transition and opens secondary; a
// repeated status whose transition is open only updates the message.
func (j *TrainingJob) appendTransition(secondary, message string, t *Time) {
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
	j.SecondaryStatusTransitions = append(j.SecondaryStatusTransitions, StatusTransition{
		Status: secondary, StartTime: t, StatusMessage: message,
	})
	j.SecondaryStatus = secondary
	j.LastModifiedTime = t
}

// TruncateRunes cuts s to at most n characters, never inside one.
func TruncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}
