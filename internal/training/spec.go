package training

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/pyvalue"
	"github.com/sagebox/sagebox/internal/staging"
)

// isReserved reports the hyperparameters the toolkit splits out of the
// user's arguments and keeps out of SM_FRAMEWORK_PARAMS (TK params.py
// SAGEMAKER_HYPERPARAMETERS).
func isReserved(k string) bool {
	switch k {
	case "sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
		"sagemaker_container_log_level", "sagemaker_job_name", "sagemaker_region", "sagemaker_s3_output",
		"default_user_module_name", "_tuning_objective_metric":
		return true
	}
	return false
}

// Fixed names of the simulated cluster.
const (
	instanceGroupName    = "homogeneousCluster"
	networkInterfaceName = "lo" // every host is this machine; see env.go
	dlcTrainingModule    = "sagemaker_pytorch_container.training:main"
	defaultLogLevel      = 20
)

type distKind uint8

const (
	distNone distKind = iota
	distTorch
	distMPI
)

// jobSpec is everything the runner needs from a TrainingJob, decoded and
// validated once.
type jobSpec struct {
	name, arn    string
	rawHPs       map[string]string
	hps          pyvalue.Value // every hyperparameter, decoded (dict, sorted keys)
	userHPs      pyvalue.Value // without sagemaker_* and reserved names
	framework    pyvalue.Value // sagemaker_* that are not reserved
	entry        string        // user_entry_point
	moduleName   string
	submitDir    string
	logLevel     pyvalue.Value
	sagemakerJob string
	region       string
	dist         distKind
	distName     string
	distributed  bool // a distribution flag is set: distribution hosts = all hosts
	procsPerHost int  // 0: GPUs on the host, else 1
	mpiOptions   string
	modelPar     bool
	hosts        []string
	instanceType string
	environment  map[string]string
	channels     []channelSpec
	metrics      []sagebox.MetricDefinition
	outputPath   string
	compression  string
	checkpoint   *sagebox.CheckpointConfig
	maxRuntime   time.Duration
}

// channelSpec is one input channel.
type channelSpec struct {
	name          string
	uri           string
	dataType      string // S3Prefix | ManifestFile
	distribution  string // FullyReplicated | ShardedByS3Key
	contentType   string
	inputMode     string // as written to inputdataconfig.json: File
	compression   string
	recordWrapper string
}

var channelNameRE = regexp.MustCompile(`^[A-Za-z0-9.\-_]{1,64}$`)

// newJobSpec decodes job. Its errors are client errors: the job is invalid.
func newJobSpec(job *sagebox.TrainingJob, region string) (*jobSpec, error) {
	s := &jobSpec{
		name:         job.TrainingJobName,
		arn:          job.TrainingJobArn,
		rawHPs:       job.HyperParameters,
		environment:  job.Environment,
		checkpoint:   job.CheckpointConfig,
		instanceType: "local",
		region:       region,
	}
	s.hps = pyvalue.NewDict()
	s.userHPs = pyvalue.NewDict()
	s.framework = pyvalue.NewDict()
	keys := make([]string, 0, len(job.HyperParameters))
	for k := range job.HyperParameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := pyvalue.Decode(job.HyperParameters[k])
		s.hps.Set(k, v)
		switch {
		case isReserved(k):
		case strings.HasPrefix(k, "sagemaker_"):
			s.framework.Set(k, v)
		default:
			s.userHPs.Set(k, v)
		}
	}
	hp := func(k string) (pyvalue.Value, bool) { return s.hps.Get(k) }

	if p := job.Environment["SAGEMAKER_PROGRAM"]; p != "" {
		s.entry = p
	} else if v, ok := hp("sagemaker_program"); ok {
		s.entry = v.Str()
	}
	if s.entry == "" {
		return nil, clientErrorf("no entry point: set the sagemaker_program hyperparameter (the SDK's entry_point) or the SAGEMAKER_PROGRAM environment variable")
	}
	s.moduleName = strings.ReplaceAll(s.entry, ".py", "")
	if v, ok := hp("sagemaker_submit_directory"); ok {
		s.submitDir = v.Str()
	}
	s.logLevel = pyvalue.Int(defaultLogLevel)
	if v, ok := hp("sagemaker_container_log_level"); ok {
		s.logLevel = v
	}
	s.sagemakerJob = s.name
	if v, ok := hp("sagemaker_job_name"); ok {
		s.sagemakerJob = v.Str()
	}
	if v, ok := hp("sagemaker_region"); ok && v.Str() != "" {
		s.region = v.Str()
	}
	s.decodeDistribution()

	if rc := job.ResourceConfig; rc != nil {
		if len(rc.InstanceGroups) > 0 && string(rc.InstanceGroups) != "null" && string(rc.InstanceGroups) != "[]" {
			return nil, clientErrorf("heterogeneous clusters (ResourceConfig.InstanceGroups) are not supported by sagebox; use InstanceType and InstanceCount")
		}
		if rc.InstanceType != "" {
			s.instanceType = rc.InstanceType
		}
	}
	count := 1
	if job.ResourceConfig != nil && job.ResourceConfig.InstanceCount > 0 {
		count = job.ResourceConfig.InstanceCount
	}
	for i := 1; i <= count; i++ {
		s.hosts = append(s.hosts, "algo-"+strconv.Itoa(i))
	}

	jobMode := "File"
	if as := job.AlgorithmSpecification; as != nil {
		s.metrics = as.MetricDefinitions
		if as.TrainingInputMode != "" {
			jobMode = as.TrainingInputMode
		}
	}
	seen := map[string]bool{}
	for _, ch := range job.InputDataConfig {
		c, err := newChannelSpec(ch, jobMode)
		if err != nil {
			return nil, err
		}
		if seen[c.name] {
			return nil, clientErrorf("channel %q is given twice", c.name)
		}
		seen[c.name] = true
		s.channels = append(s.channels, c)
	}
	if o := job.OutputDataConfig; o != nil {
		s.outputPath = o.S3OutputPath
		s.compression = strings.ToUpper(o.CompressionType)
	}
	if sc := job.StoppingCondition; sc != nil && sc.MaxRuntimeInSeconds > 0 {
		s.maxRuntime = time.Duration(sc.MaxRuntimeInSeconds) * time.Second
	}
	return s, nil
}

// decodeDistribution picks the launcher the way PTK training.py does:
// mpi > pytorch_ddp > torch_distributed > smdistributed dataparallel.
func (s *jobSpec) decodeDistribution() {
	flag := func(k string) bool { v, ok := s.hps.Get(k); return ok && v.Truthy() }
	switch {
	case flag("sagemaker_mpi_enabled"):
		s.dist, s.distName = distMPI, "mpi"
	case flag("sagemaker_pytorch_ddp_enabled"):
		s.dist, s.distName = distMPI, "pytorchddp"
	case flag("sagemaker_torch_distributed_enabled"):
		s.dist, s.distName = distTorch, "torch_distributed"
	case flag("sagemaker_distributed_dataparallel_enabled"):
		s.dist, s.distName = distMPI, "smdistributed dataparallel"
	}
	s.distributed = s.dist != distNone || flag("sagemaker_pytorch_xla_multi_worker_enabled")
	if v, ok := s.hps.Get("sagemaker_mpi_num_of_processes_per_host"); ok {
		if n, err := strconv.Atoi(v.Str()); err == nil && n > 0 {
			s.procsPerHost = n
		}
	}
	for _, k := range []string{"sagemaker_mpi_custom_mpi_options", "sagemaker_distributed_dataparallel_custom_mpi_options"} {
		if v, ok := s.hps.Get(k); ok && v.Str() != "" {
			s.mpiOptions = v.Str()
		}
	}
	_, hasMP := s.hps.Get("mp_parameters")
	s.modelPar = flag("sagemaker_mpi_enabled") && hasMP
}

func newChannelSpec(ch sagebox.Channel, jobMode string) (channelSpec, error) {
	c := channelSpec{
		name:          ch.ChannelName,
		contentType:   ch.ContentType,
		compression:   ch.CompressionType,
		recordWrapper: ch.RecordWrapperType,
		inputMode:     jobMode,
	}
	if !channelNameRE.MatchString(c.name) {
		return c, clientErrorf("channel name %q must match [A-Za-z0-9.-_]{1,64}", c.name)
	}
	if ch.InputMode != "" {
		c.inputMode = ch.InputMode
	}
	switch c.inputMode {
	case "File", "FastFile":
		c.inputMode = "File" // FastFile is written as File (DG)
	case "Pipe":
		return c, clientErrorf("channel %q: Pipe input mode is not supported by sagebox; use File or FastFile", c.name)
	default:
		return c, clientErrorf("channel %q: unknown input mode %q", c.name, c.inputMode)
	}
	if c.recordWrapper == "" {
		c.recordWrapper = "None"
	}
	if ch.DataSource == nil || ch.DataSource.S3DataSource == nil {
		return c, clientErrorf("channel %q: only S3DataSource (s3:// or file://) is supported", c.name)
	}
	src := ch.DataSource.S3DataSource
	c.uri = src.S3Uri
	c.dataType = src.S3DataType
	if c.dataType == "" {
		c.dataType = "S3Prefix"
	}
	if c.dataType != "S3Prefix" && c.dataType != "ManifestFile" {
		return c, clientErrorf("channel %q: S3DataType %s is not supported (S3Prefix and ManifestFile are)", c.name, c.dataType)
	}
	c.distribution = src.S3DataDistributionType
	if c.distribution == "" {
		c.distribution = "FullyReplicated"
	}
	if c.distribution != "FullyReplicated" && c.distribution != "ShardedByS3Key" {
		return c, clientErrorf("channel %q: unknown S3DataDistributionType %q", c.name, c.distribution)
	}
	if !strings.HasPrefix(c.uri, "s3://") && !strings.HasPrefix(c.uri, "file://") {
		return c, clientErrorf("channel %q: S3Uri %q must start with s3:// or file://", c.name, c.uri)
	}
	return c, nil
}

// jobError is a job failure whose FailureReason is already formatted.
type jobError struct {
	reason string
	err    error
}

func (e *jobError) Error() string { return e.reason }
func (e *jobError) Unwrap() error { return e.err }

// clientErrorf is a failure caused by the job's own configuration or data.
func clientErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &jobError{reason: "ClientError: " + err.Error(), err: err}
}

// failureReason gives the FailureReason for err.
func failureReason(err error) string {
	if reason, ok := jobReason(err); ok {
		return sagebox.TruncateRunes(reason, sagebox.MaxFailureReason)
	}
	return sagebox.TruncateRunes("InternalServerError: "+err.Error(), sagebox.MaxFailureReason)
}

// jobReason is the formatted FailureReason err carries, if any: a
// jobError's, or a staging.ClientError's ("ClientError: ...").
func jobReason(err error) (string, bool) {
	var je *jobError
	if errors.As(err, &je) {
		return je.reason, true
	}
	var ce *staging.ClientError
	if errors.As(err, &ce) {
		return ce.Error(), true
	}
	return "", false
}
