package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

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
	job := clientMembers(&in.job)
	job.TrainingJobArn = h.arn("training-job", job.TrainingJobName)
	job.Begin(h.cfg.Now())
	job.ProfilingStatus = profilingStatus(job.ProfilerConfig)

	// Once accepted, the job is stored and submitted even if the client
	// hangs up meanwhile.
	ctx = context.WithoutCancel(ctx)
	if err := h.jobs.CreateTrainingJob(ctx, job); err != nil {
		return nil, err
	}
	if err := h.runner.Submit(ctx, job.TrainingJobName); err != nil {
		h.logger.Error("submit training job", slog.String("job", job.TrainingJobName), slog.Any("err", err))
		reason := sagebox.TruncateRunes("sagebox could not start the training job: "+err.Error(), sagebox.MaxFailureReason)
		_, uerr := h.jobs.UpdateTrainingJob(ctx, job.TrainingJobName, func(j *sagebox.TrainingJob) error {
			if j.TrainingJobStatus == sagebox.StatusInProgress {
				return j.Fail(reason, h.cfg.Now())
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
		return j.RequestStop(sagebox.SecondaryStopped, sagebox.MsgStopping, h.cfg.Now())
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
