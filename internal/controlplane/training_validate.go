package controlplane

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/sagebox/sagebox"
)

// Constraint patterns of the SageMaker model.
var (
	jobNamePattern      = newPattern(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`)
	nameContainsPattern = newPattern(`[a-zA-Z0-9\-]+`)
	roleArnPattern      = newPattern(`^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)
	s3URIPattern        = newPattern(`^(https|s3)://([^/]+)/?(.*)$`)
	channelURIPattern   = newPattern(`^(https|s3)://([^/]+)/?(.*)$|^file:///.*$`) // sagebox also takes file:// for channels
	channelNamePattern  = newPattern(`[A-Za-z0-9\.\-_]+`)
	instanceTypePattern = newPattern(`ml\..+`)
	envKeyPattern       = newPattern(`[a-zA-Z_][a-zA-Z0-9_]*`)
	anyPattern          = newPattern(`.*`)
	anyLinesPattern     = newPattern(`[\S\s]*`)
	tagPattern          = newPattern(`^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`)
	nonEmptyPattern     = newPattern(`.+`)
)

// createTrainingJobInput is a CreateTrainingJob request: the job as the
// client sent it, plus which numeric members were present at all (the
// domain type cannot tell an absent InstanceCount from 0).
type createTrainingJobInput struct {
	job sagebox.TrainingJob
	set struct {
		ResourceConfig *struct {
			InstanceCount            *int64
			VolumeSizeInGB           *int64
			KeepAlivePeriodInSeconds *int64
		}
		StoppingCondition *struct {
			MaxRuntimeInSeconds     *int64
			MaxWaitTimeInSeconds    *int64
			MaxPendingTimeInSeconds *int64
		}
		RetryStrategy *struct {
			MaximumRetryAttempts *int64
		}
	}
}

// UnmarshalJSON decodes the request twice: into the job and into the
// presence record.
func (in *createTrainingJobInput) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &in.job); err != nil {
		return err
	}
	return json.Unmarshal(b, &in.set)
}

// validate checks every constraint of the request, reporting all violations
// at once as ValidationException, like SageMaker's model validation.
func (in *createTrainingJobInput) validate() error {
	var v violations
	j := &in.job
	v.str("trainingJobName", j.TrainingJobName, true, 1, 63, &jobNamePattern)
	v.str("roleArn", j.RoleArn, true, 20, 2048, &roleArnPattern)
	// The model no longer marks AlgorithmSpecification and ResourceConfig
	// required, but the service refuses a job without them (and what to
	// run, and on what, is in them).
	if v.required("algorithmSpecification", j.AlgorithmSpecification != nil) {
		validateAlgorithm(&v, j.AlgorithmSpecification)
	}
	validateHyperParameters(&v, j.HyperParameters)
	if j.InputDataConfig != nil {
		v.count("inputDataConfig", j.InputDataConfig, len(j.InputDataConfig), 1, 20)
		for i := range j.InputDataConfig {
			validateChannel(&v, member("inputDataConfig", i), &j.InputDataConfig[i])
		}
	}
	if v.required("outputDataConfig", j.OutputDataConfig != nil) {
		o := j.OutputDataConfig
		v.str("outputDataConfig.s3OutputPath", o.S3OutputPath, true, 0, 1024, &s3URIPattern)
		v.str("outputDataConfig.kmsKeyId", o.KmsKeyId, false, 0, 2048, &anyPattern)
		v.enum("outputDataConfig.compressionType", o.CompressionType, "GZIP", "NONE")
	}
	if v.required("resourceConfig", j.ResourceConfig != nil) {
		r := j.ResourceConfig
		groups := len(r.InstanceGroups) > 0 && string(r.InstanceGroups) != "null"
		v.str("resourceConfig.instanceType", r.InstanceType, !groups, 0, noMax, &instanceTypePattern)
		v.str("resourceConfig.volumeKmsKeyId", r.VolumeKmsKeyId, false, 0, 2048, &anyPattern)
	}
	if set := in.set.ResourceConfig; set != nil {
		v.num("resourceConfig.instanceCount", set.InstanceCount, 1, noMax)
		v.num("resourceConfig.volumeSizeInGB", set.VolumeSizeInGB, 1, noMax)
		v.num("resourceConfig.keepAlivePeriodInSeconds", set.KeepAlivePeriodInSeconds, 0, 3600)
	}
	if set := in.set.StoppingCondition; set != nil {
		v.num("stoppingCondition.maxRuntimeInSeconds", set.MaxRuntimeInSeconds, 1, noMax)
		v.num("stoppingCondition.maxWaitTimeInSeconds", set.MaxWaitTimeInSeconds, 1, noMax)
		v.num("stoppingCondition.maxPendingTimeInSeconds", set.MaxPendingTimeInSeconds, 7200, 2419200)
	}
	v.stringMap("environment", j.Environment, 48,
		shape{min: 0, max: 512, pattern: &envKeyPattern}, shape{min: 0, max: 512, pattern: &anyLinesPattern})
	if c := j.CheckpointConfig; c != nil {
		v.str("checkpointConfig.s3Uri", c.S3Uri, true, 0, 1024, &s3URIPattern)
		v.str("checkpointConfig.localPath", c.LocalPath, false, 0, 4096, &anyPattern)
	}
	if set := in.set.RetryStrategy; set != nil {
		v.required("retryStrategy.maximumRetryAttempts", set.MaximumRetryAttempts != nil)
		v.num("retryStrategy.maximumRetryAttempts", set.MaximumRetryAttempts, 1, 30)
	}
	validateTags(&v, j.Tags)
	return v.err(sagebox.ErrValidation)
}

func validateAlgorithm(v *violations, a *sagebox.AlgorithmSpecification) {
	const p = "algorithmSpecification"
	v.str(p+".trainingImage", a.TrainingImage, false, 0, 255, &anyPattern)
	v.str(p+".algorithmName", a.AlgorithmName, false, 1, 170, nil)
	if v.required(p+".trainingInputMode", a.TrainingInputMode != "") {
		v.enum(p+".trainingInputMode", a.TrainingInputMode, "Pipe", "File", "FastFile")
	}
	v.count(p+".metricDefinitions", a.MetricDefinitions, len(a.MetricDefinitions), 0, 40)
	for i, m := range a.MetricDefinitions {
		path := member(p+".metricDefinitions", i)
		v.str(path+".name", m.Name, true, 1, 255, &nonEmptyPattern)
		v.str(path+".regex", m.Regex, true, 1, 500, &nonEmptyPattern)
	}
	if a.ContainerEntrypoint != nil {
		v.count(p+".containerEntrypoint", a.ContainerEntrypoint, len(a.ContainerEntrypoint), 1, 10)
	}
	if a.ContainerArguments != nil {
		v.count(p+".containerArguments", a.ContainerArguments, len(a.ContainerArguments), 1, 100)
	}
}

func validateHyperParameters(v *violations, hp map[string]string) {
	v.stringMap("hyperParameters", hp, 100,
		shape{min: 0, max: 256, pattern: &anyPattern}, shape{min: 0, max: 2500, pattern: &anyPattern})
}

func validateChannel(v *violations, path string, c *sagebox.Channel) {
	v.str(path+".channelName", c.ChannelName, true, 1, 64, &channelNamePattern)
	if v.required(path+".dataSource", c.DataSource != nil) {
		if s := c.DataSource.S3DataSource; s != nil {
			sp := path + ".dataSource.s3DataSource"
			if v.required(sp+".s3DataType", s.S3DataType != "") {
				v.enum(sp+".s3DataType", s.S3DataType, "ManifestFile", "S3Prefix", "AugmentedManifestFile")
			}
			v.str(sp+".s3Uri", s.S3Uri, true, 0, 1024, &channelURIPattern)
			v.enum(sp+".s3DataDistributionType", s.S3DataDistributionType, "FullyReplicated", "ShardedByS3Key")
		}
	}
	v.str(path+".contentType", c.ContentType, false, 0, 256, &anyPattern)
	v.enum(path+".compressionType", c.CompressionType, "None", "Gzip")
	v.enum(path+".recordWrapperType", c.RecordWrapperType, "None", "RecordIO")
	v.enum(path+".inputMode", c.InputMode, "Pipe", "File", "FastFile")
}

func validateTags(v *violations, tags []sagebox.Tag) {
	v.count("tags", tags, len(tags), 0, 50)
	for i, t := range tags {
		path := member("tags", i)
		v.str(path+".key", t.Key, true, 1, 128, &tagPattern)
		v.str(path+".value", t.Value, false, 0, 256, &tagPattern)
	}
}

// check applies the rules SageMaker (and sagebox) enforce beyond the model's
// constraints, after validate passed. It returns the first failure.
func (in *createTrainingJobInput) check(maxInstances int) error {
	j := &in.job
	if a := j.AlgorithmSpecification; a != nil && a.TrainingImage == "" && a.AlgorithmName == "" {
		return sagebox.Errorf(sagebox.ErrValidation, "Either AlgorithmName or TrainingImage must be specified in AlgorithmSpecification.")
	}
	if a := j.AlgorithmSpecification; a != nil {
		for _, m := range a.MetricDefinitions {
			if _, err := regexp.Compile(m.Regex); err != nil {
				return sagebox.Errorf(sagebox.ErrValidation,
					"The regular expression of metric %q does not compile in sagebox (Go RE2 syntax): %s.", m.Name, err.Error())
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range j.InputDataConfig {
		if seen[c.ChannelName] {
			return sagebox.Errorf(sagebox.ErrValidation, "Channel names must be unique: InputDataConfig has more than one channel named %q.", c.ChannelName)
		}
		seen[c.ChannelName] = true
		if c.DataSource.S3DataSource == nil {
			return sagebox.Errorf(sagebox.ErrValidation,
				"Channel %q has no S3DataSource: sagebox supports only S3DataSource channels (s3:// or file:// URIs), not FileSystemDataSource.", c.ChannelName)
		}
	}
	if r := j.ResourceConfig; r != nil {
		if len(r.InstanceGroups) > 0 && string(r.InstanceGroups) != "null" {
			return sagebox.Errorf(sagebox.ErrValidation, "sagebox does not support heterogeneous clusters: use InstanceCount instead of InstanceGroups.")
		}
		if r.InstanceCount > maxInstances {
			return sagebox.Errorf(sagebox.ErrResourceLimit,
				"The sagebox limit on instances per training job is %d; the request asked for %d instances.", maxInstances, r.InstanceCount)
		}
	}
	if programOf(j) == "" {
		return sagebox.Errorf(sagebox.ErrValidation,
			"sagebox needs the training script to run: set the hyperparameter sagemaker_program (the SageMaker SDK's entry_point, e.g. \"train.py\") or SAGEMAKER_PROGRAM in Environment.")
	}
	return nil
}

// programOf returns the training script a job names: the sagemaker_program
// hyperparameter (JSON-decoded when it is a JSON string, as the SageMaker SDK
// sends it) or SAGEMAKER_PROGRAM in Environment; "" when neither is set.
func programOf(j *sagebox.TrainingJob) string {
	if p := j.HyperParameters["sagemaker_program"]; p != "" {
		var s string
		if json.Unmarshal([]byte(p), &s) == nil {
			p = s
		}
		if p = strings.TrimSpace(p); p != "" {
			return p
		}
	}
	return strings.TrimSpace(j.Environment["SAGEMAKER_PROGRAM"])
}

// applyDefaults fills in what SageMaker fills in for absent members.
func (in *createTrainingJobInput) applyDefaults() {
	j := &in.job
	if j.ResourceConfig == nil {
		j.ResourceConfig = &sagebox.ResourceConfig{}
	}
	if j.ResourceConfig.InstanceCount == 0 {
		j.ResourceConfig.InstanceCount = 1
	}
	if j.ResourceConfig.VolumeSizeInGB == 0 {
		j.ResourceConfig.VolumeSizeInGB = 30
	}
	if j.StoppingCondition == nil {
		j.StoppingCondition = &sagebox.StoppingCondition{}
	}
	if j.StoppingCondition.MaxRuntimeInSeconds == 0 {
		j.StoppingCondition.MaxRuntimeInSeconds = 86400
	}
	for i := range j.InputDataConfig {
		s := j.InputDataConfig[i].DataSource.S3DataSource
		if s.S3DataDistributionType == "" {
			s.S3DataDistributionType = "FullyReplicated"
		}
	}
}

// profilingStatus is "Enabled" when ProfilerConfig is present and does not
// disable the profiler, as SageMaker reports it, else "Disabled".
func profilingStatus(raw sagebox.RawJSON) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "Disabled"
	}
	var pc struct{ DisableProfiler bool }
	if err := json.Unmarshal(raw, &pc); err != nil || pc.DisableProfiler {
		return "Disabled"
	}
	return "Enabled"
}
