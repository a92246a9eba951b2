package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// Status messages of the transitions this package records.
const (
	msgStarting = "Preparing the instances for training"
	msgStopping = "Stopping the training job"
	msgFailed   = "Training job failed"
)

// maxFailureReason is the longest FailureReason SageMaker returns.
const maxFailureReason = 1024

// errJobNotFound is SageMaker's real answer for a missing training job.
func errJobNotFound() error {
	return sagebox.Errorf(sagebox.ErrValidation, "Requested resource not found.")
}

type createTrainingJobOutput struct {
	TrainingJobArn string `json:"TrainingJobArn"`
}

// createTrainingJob validates and stores a job as InProgress/Starting, then
// hands it to the runner. If the runner refuses it, the job is marked Failed
// with the reason; the call itself still succeeds, as SageMaker's does for a
// job that fails after creation.
func (h *Handler) createTrainingJob(ctx context.Context, in *createTrainingJobInput) (*createTrainingJobOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := in.check(h.cfg.MaxInstanceCount); err != nil {
		return nil, err
	}
	in.applyDefaults()
	now := sagebox.NewTime(h.cfg.Now())
	job := clientMembers(&in.job)
	job.TrainingJobArn = h.arn("training-job", job.TrainingJobName)
	job.TrainingJobStatus = sagebox.StatusInProgress
	job.SecondaryStatus = sagebox.SecondaryStarting
	job.SecondaryStatusTransitions = []sagebox.StatusTransition{
		{Status: sagebox.SecondaryStarting, StartTime: now, StatusMessage: msgStarting},
	}
	job.CreationTime = now
	job.LastModifiedTime = now
	job.ProfilingStatus = profilingStatus(job.ProfilerConfig)

	// Once accepted, the job is stored and submitted even if the client
	// hangs up meanwhile.
	ctx = context.WithoutCancel(ctx)
	if err := h.jobs.CreateTrainingJob(ctx, job); err != nil {
		return nil, err
	}
	if err := h.runner.Submit(ctx, job.TrainingJobName); err != nil {
		h.logger.Error("submit training job", slog.String("job", job.TrainingJobName), slog.Any("err", err))
		reason := "sagebox could not start the training job: " + err.Error()
		_, uerr := h.jobs.UpdateTrainingJob(ctx, job.TrainingJobName, func(j *sagebox.TrainingJob) error {
			if j.TrainingJobStatus == sagebox.StatusInProgress {
				failJob(j, h.cfg.Now(), reason)
			}
			return nil
		})
		if uerr != nil {
			return nil, fmt.Errorf("mark training job %s failed: %w", job.TrainingJobName, uerr)
		}
	}
	return &createTrainingJobOutput{TrainingJobArn: job.TrainingJobArn}, nil
}

// clientMembers copies the members a client may set; everything sagebox
// owns starts empty.
func clientMembers(in *sagebox.TrainingJob) *sagebox.TrainingJob {
	return &sagebox.TrainingJob{
		TrainingJobName:                       in.TrainingJobName,
		AlgorithmSpecification:                in.AlgorithmSpecification,
		RoleArn:                               in.RoleArn,
		HyperParameters:                       in.HyperParameters,
		InputDataConfig:                       in.InputDataConfig,
		OutputDataConfig:                      in.OutputDataConfig,
		ResourceConfig:                        in.ResourceConfig,
		StoppingCondition:                     in.StoppingCondition,
		Environment:                           in.Environment,
		CheckpointConfig:                      in.CheckpointConfig,
		Tags:                                  in.Tags,
		RetryStrategy:                         in.RetryStrategy,
		EnableNetworkIsolation:                in.EnableNetworkIsolation,
		EnableInterContainerTrafficEncryption: in.EnableInterContainerTrafficEncryption,
		EnableManagedSpotTraining:             in.EnableManagedSpotTraining,
		VpcConfig:                             in.VpcConfig,
		DebugHookConfig:                       in.DebugHookConfig,
		DebugRuleConfigurations:               in.DebugRuleConfigurations,
		ProfilerConfig:                        in.ProfilerConfig,
		ProfilerRuleConfigurations:            in.ProfilerRuleConfigurations,
		TensorBoardOutputConfig:               in.TensorBoardOutputConfig,
		ExperimentConfig:                      in.ExperimentConfig,
	}
}

// failJob moves j to Failed/Failed at now with reason.
func failJob(j *sagebox.TrainingJob, now time.Time, reason string) {
	t := sagebox.NewTime(now)
	if len(reason) > maxFailureReason {
		reason = strings.ToValidUTF8(reason[:maxFailureReason], "")
	}
	transition(j, sagebox.SecondaryFailed, t, msgFailed)
	j.TrainingJobStatus = sagebox.StatusFailed
	j.FailureReason = reason
	j.TrainingEndTime = t
}

// transition ends the current secondary status at t and starts status.
func transition(j *sagebox.TrainingJob, status string, t *sagebox.Time, message string) {
	if n := len(j.SecondaryStatusTransitions); n > 0 && j.SecondaryStatusTransitions[n-1].EndTime == nil {
		j.SecondaryStatusTransitions[n-1].EndTime = t
	}
	j.SecondaryStatusTransitions = append(j.SecondaryStatusTransitions,
		sagebox.StatusTransition{Status: status, StartTime: t, StatusMessage: message})
	j.SecondaryStatus = status
	j.LastModifiedTime = t
}

type jobNameInput struct {
	TrainingJobName string `json:"TrainingJobName"`
}

func (in *jobNameInput) validate() error {
	var v violations
	v.str("trainingJobName", in.TrainingJobName, true, 1, 63, &jobNamePattern)
	return v.err(sagebox.ErrValidation)
}

// describeTrainingJob returns the stored job.
func (h *Handler) describeTrainingJob(ctx context.Context, in *jobNameInput) (*sagebox.TrainingJob, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	job, err := h.jobs.TrainingJob(ctx, in.TrainingJobName)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, errJobNotFound()
	}
	if err != nil {
		return nil, err
	}
	return job, nil
}

// stopTrainingJob moves an InProgress job to Stopping and asks the runner
// to stop it.
func (h *Handler) stopTrainingJob(ctx context.Context, in *jobNameInput) (*struct{}, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	_, err := h.jobs.UpdateTrainingJob(ctx, in.TrainingJobName, func(j *sagebox.TrainingJob) error {
		if j.TrainingJobStatus != sagebox.StatusInProgress {
			return sagebox.Errorf(sagebox.ErrValidation,
				"The request was rejected because the training job is in status %s.", j.TrainingJobStatus)
		}
		j.TrainingJobStatus = sagebox.StatusStopping
		transition(j, sagebox.SecondaryStopping, sagebox.NewTime(h.cfg.Now()), msgStopping)
		return nil
	})
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, errJobNotFound()
	}
	if err != nil {
		return nil, err
	}
	if err := h.runner.Stop(ctx, in.TrainingJobName); err != nil {
		return nil, fmt.Errorf("stop training job %s: %w", in.TrainingJobName, err)
	}
	return &struct{}{}, nil
}

// arn builds a SageMaker ARN; resource names are lower-cased as AWS does.
func (h *Handler) arn(kind, name string) string {
	return "arn:aws:sagemaker:" + h.cfg.Region + ":" + h.cfg.AccountID + ":" + kind + "/" + strings.ToLower(name)
}
