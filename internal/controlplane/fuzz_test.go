package controlplane

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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

// FuzzCreateModel feeds arbitrary bodies through CreateModel's decoding,
// validation and checks: none may panic, every failure is a client fault,
// and an accepted model has one to 15 containers, from exactly one of
// PrimaryContainer and Containers, and snapshots with a unique hostname
// per container.
func FuzzCreateModel(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `{"ModelName":"m","PrimaryContainer":{"ModelDataUrl":"s3://b/m.tar.gz"}}`,
		`{"ModelName":"m","PrimaryContainer":{},"Containers":[]}`,
		`{"ModelName":"m","Containers":[{"ContainerHostname":"a"},{"ContainerHostname":"container-1"},{}],"InferenceExecutionConfig":{"Mode":"Serial"}}`,
		`{"ModelName":"m","Containers":[{"ContainerHostname":"a"},{}],"InferenceExecutionConfig":{"Mode":"Direct"}}`,
		`{"ModelName":"m","PrimaryContainer":{"ModelDataSource":{"S3DataSource":{"S3Uri":"s3://b/p/","S3DataType":"S3Prefix","CompressionType":"None"}},"Environment":{"A":"b"}}}`,
		`{"ModelName":"m","PrimaryContainer":{"ModelDataSource":{}},"Tags":[{"Key":"k"}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in createModelInput
		err := decode(body, &in)
		if err == nil {
			if err = in.validate(); err == nil {
				err = in.check()
			}
		}
		if err != nil {
			if sagebox.ErrorCode(err) == sagebox.ErrInternal {
				t.Fatalf("client input produced an internal error: %v", err)
			}
			return
		}
		m := &in.Model
		if (m.PrimaryContainer != nil) == (m.Containers != nil) {
			t.Fatalf("accepted a model with PrimaryContainer %v and Containers %v", m.PrimaryContainer, m.Containers)
		}
		if n := len(m.ContainerList()); n < 1 || n > sagebox.MaxContainers {
			t.Fatalf("accepted %d containers", n)
		}
		seen := map[string]bool{}
		snap := snapshotModel(m)
		for _, c := range snap.ContainerList() {
			h := strings.ToLower(c.ContainerHostname)
			if h == "" || seen[h] {
				t.Fatalf("snapshot hostname %q empty or repeated", c.ContainerHostname)
			}
			seen[h] = true
		}
	})
}

// FuzzCreateEndpointConfig feeds arbitrary bodies through
// CreateEndpointConfig's decoding, validation and checks: none may panic,
// every failure is a client fault, and an accepted config keeps
// ProductionVariants as valid compact JSON that decodes to the variants
// checked, with at least one weight above 0.
func FuzzCreateEndpointConfig(f *testing.F) {
	seeds := []string{
		``, `{}`, `{"ProductionVariants":null}`, `{"ProductionVariants":[null]}`,
		`{"EndpointConfigName":"c","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InitialVariantWeight":1,"InitialInstanceCount":1,"InstanceType":"ml.m5.xlarge","VolumeSizeInGB":30}]}`,
		`{"EndpointConfigName":"c","ProductionVariants":[ {"VariantName":"a","ModelName":"m","InstanceType":"ml.x","InitialVariantWeight":0} , {"VariantName":"b","ModelName":"m","InstanceType":"ml.x"} ]}`,
		`{"EndpointConfigName":"c","ProductionVariants":[{"VariantName":"a","ModelName":"m","InitialInstanceCount":1.5}]}`,
		`{"EndpointConfigName":"c","ProductionVariants":{},"ShadowProductionVariants":[{}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in createEndpointConfigInput
		err := decode(body, &in)
		if err == nil {
			if err = in.validate(); err == nil {
				err = in.check()
			}
		}
		if err != nil {
			if sagebox.ErrorCode(err) == sagebox.ErrInternal {
				t.Fatalf("client input produced an internal error: %v", err)
			}
			return
		}
		vs, err := in.config.Variants()
		if err != nil || !reflect.DeepEqual(vs, in.variants) {
			t.Fatalf("stored variants %s decode to %v (%v), checked %v", in.config.ProductionVariants, vs, err, in.variants)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, in.config.ProductionVariants); err != nil || !bytes.Equal(compact.Bytes(), in.config.ProductionVariants) {
			t.Fatalf("stored variants are not compact JSON: %s", in.config.ProductionVariants)
		}
		total := 0.0
		for _, v := range vs {
			total += variantWeight(v)
			if variantCount(v) < 1 {
				t.Fatalf("accepted instance count %d", variantCount(v))
			}
		}
		if total <= 0 {
			t.Fatalf("accepted all weights 0: %s", in.config.ProductionVariants)
		}
	})
}
