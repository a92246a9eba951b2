package toolkit

import (
	"time"

	"github.com/sagebox/sagebox"
)

// newTestJob is a job as CreateTrainingJob stores it.
func newTestJob(name string, hps map[string]string, opts ...func(*sagebox.TrainingJob)) *sagebox.TrainingJob {
	now := time.Now()
	j := &sagebox.TrainingJob{
		TrainingJobName:        name,
		TrainingJobArn:         "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + name,
		AlgorithmSpecification: &sagebox.AlgorithmSpecification{TrainingImage: "pytorch-training:1.13-cpu-py3", TrainingInputMode: "File"},
		HyperParameters:        hps,
		ResourceConfig:         &sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: 1, VolumeSizeInGB: 30},
		OutputDataConfig:       &sagebox.OutputDataConfig{S3OutputPath: "s3://bkt/output"},
		StoppingCondition:      &sagebox.StoppingCondition{MaxRuntimeInSeconds: 600},
		TrainingJobStatus:      sagebox.StatusInProgress,
		SecondaryStatus:        sagebox.SecondaryStarting,
		SecondaryStatusTransitions: []sagebox.StatusTransition{{
			Status: sagebox.SecondaryStarting, StartTime: sagebox.NewTime(now), StatusMessage: "Starting the training job",
		}},
		CreationTime:     sagebox.NewTime(now),
		LastModifiedTime: sagebox.NewTime(now),
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func jobWithHPs(hps map[string]string) *sagebox.TrainingJob {
	if _, ok := hps["sagemaker_program"]; !ok {
		hps["sagemaker_program"] = `"train.py"`
	}
	return newTestJob("hp-job", hps)
}

func withChannel(name, uri, dist string) func(*sagebox.TrainingJob) {
	return func(j *sagebox.TrainingJob) {
		j.InputDataConfig = append(j.InputDataConfig, sagebox.Channel{
			ChannelName: name,
			DataSource:  &sagebox.DataSource{S3DataSource: &sagebox.S3DataSource{S3DataType: "S3Prefix", S3Uri: uri, S3DataDistributionType: dist}},
		})
	}
}

func withHosts(n int) func(*sagebox.TrainingJob) {
	return func(j *sagebox.TrainingJob) { j.ResourceConfig.InstanceCount = n }
}
