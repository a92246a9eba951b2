package controlplane

import (
	"encoding/json"
	"testing"

	"github.com/sagebox/sagebox"
)

// FuzzCreateTrainingJob feeds arbitrary bodies through CreateTrainingJob's
// decoding, validation, checks and defaults: none may panic, every failure
// is a *sagebox.Error (a client fault, never an internal error), and a
// request that passes gets a complete ResourceConfig and StoppingCondition.
func FuzzCreateTrainingJob(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"TrainingJobName":1}`,
		`{"TrainingJobName":"j","RoleArn":"arn:aws:iam::123456789012:role/R","OutputDataConfig":{"S3OutputPath":"s3://b/o"},"HyperParameters":{"sagemaker_program":"\"t.py\""}}`,
		`{"TrainingJobName":"j","RoleArn":"arn:aws:iam::123456789012:role/R","OutputDataConfig":{"S3OutputPath":"s3://b"},"Environment":{"SAGEMAKER_PROGRAM":"t.py"},"ResourceConfig":{"InstanceCount":0},"StoppingCondition":null}`,
		`{"InputDataConfig":[{"ChannelName":"a","DataSource":{}},{"ChannelName":"a"}],"ResourceConfig":{"InstanceGroups":[{}]}}`,
		`{"AlgorithmSpecification":{"TrainingInputMode":"File","MetricDefinitions":[{"Name":"x","Regex":"(("}]},"RetryStrategy":{},"Tags":[{"Key":""}]}`,
		`{"ResourceConfig":{"InstanceCount":99999999999},"StoppingCondition":{"MaxRuntimeInSeconds":-1},"ProfilerConfig":{"DisableProfiler":"yes"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in createTrainingJobInput
		err := decode(body, &in)
		if err == nil {
			if err = in.validate(); err == nil {
				err = in.check(DefaultMaxInstanceCount)
			}
		}
		if err != nil {
			if sagebox.ErrorCode(err) == sagebox.ErrInternal {
				t.Fatalf("client input produced an internal error: %v", err)
			}
			return
		}
		in.applyDefaults()
		job := clientMembers(&in.job)
		job.ProfilingStatus = profilingStatus(job.ProfilerConfig)
		if job.ResourceConfig.InstanceCount < 1 || job.ResourceConfig.VolumeSizeInGB < 1 || job.StoppingCondition.MaxRuntimeInSeconds < 1 {
			t.Fatalf("accepted job without sane defaults: %+v %+v", job.ResourceConfig, job.StoppingCondition)
		}
		if programOf(job) == "" {
			t.Fatal("accepted job without a program")
		}
		if _, err := json.Marshal(job); err != nil {
			t.Fatalf("accepted job does not encode: %v", err)
		}
	})
}
