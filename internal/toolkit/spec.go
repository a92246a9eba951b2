package toolkit

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

// DistKind is how a job's processes are launched: the script once per
// host, torchrun (torch_distributed), or mpirun (mpi, pytorchddp,
// smdistributed dataparallel).
type DistKind uint8

// The launchers.
const (
	DistNone DistKind = iota
	DistTorch
	DistMPI
)

// Spec is everything the runner needs from a TrainingJob, decoded and
// validated once.
type Spec struct {
	Name, ARN           string
	RawHyperParameters  map[string]string
	HyperParameters     pyvalue.Value // every hyperparameter, decoded (dict, sorted keys)
	UserHyperParameters pyvalue.Value // without sagemaker_* and reserved names
	FrameworkParameters pyvalue.Value // sagemaker_* that are not reserved
	EntryPoint          string        // user_entry_point
	ModuleName          string
	SubmitDir           string
	LogLevel            pyvalue.Value
	SagemakerJobName    string
	Region              string
	Dist                DistKind
	DistName            string
	Distributed         bool // a distribution flag is set: distribution hosts = all hosts
	ProcsPerHost        int  // 0: GPUs on the host, else 1
	MPIOptions          string
	ModelParallel       bool
	Hosts               []string
	InstanceType        string
	VolumeSizeInGB      int // ResourceConfig.VolumeSizeInGB; 0 when not given
	Environment         map[string]string
	Channels            []Channel
	Metrics             []sagebox.MetricDefinition
	OutputPath          string
	Compression         string
	Checkpoint          *sagebox.CheckpointConfig
	MaxRuntime          time.Duration
}

// Channel is one input channel.
type Channel struct {
	Name          string
	URI           string
	DataType      string // S3Prefix | ManifestFile
	Distribution  string // FullyReplicated | ShardedByS3Key
	ContentType   string
	InputMode     string // as written to inputdataconfig.json: File
	Compression   string
	RecordWrapper string
}

var channelNameRE = regexp.MustCompile(`^[A-Za-z0-9.\-_]{1,64}$`)

// NewSpec decodes job. Its errors are client errors: the job is invalid.
func NewSpec(job *sagebox.TrainingJob, region string) (*Spec, error) {
	s := &Spec{
		Name:               job.TrainingJobName,
		ARN:                job.TrainingJobArn,
		RawHyperParameters: job.HyperParameters,
		Environment:        job.Environment,
		Checkpoint:         job.CheckpointConfig,
		InstanceType:       "local",
		Region:             region,
	}
	s.HyperParameters = pyvalue.NewDict()
	s.UserHyperParameters = pyvalue.NewDict()
	s.FrameworkParameters = pyvalue.NewDict()
	keys := make([]string, 0, len(job.HyperParameters))
	for k := range job.HyperParameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := pyvalue.Decode(job.HyperParameters[k])
		s.HyperParameters.Set(k, v)
		switch {
		case isReserved(k):
		case strings.HasPrefix(k, "sagemaker_"):
			s.FrameworkParameters.Set(k, v)
		default:
			s.UserHyperParameters.Set(k, v)
		}
	}
	hp := func(k string) (pyvalue.Value, bool) { return s.HyperParameters.Get(k) }

	if p := job.Environment["SAGEMAKER_PROGRAM"]; p != "" {
		s.EntryPoint = p
	} else if v, ok := hp("sagemaker_program"); ok {
		s.EntryPoint = v.Str()
	}
	if s.EntryPoint == "" {
		return nil, ClientErrorf("no entry point: set the sagemaker_program hyperparameter (the SDK's entry_point) or the SAGEMAKER_PROGRAM environment variable")
	}
	s.ModuleName = strings.ReplaceAll(s.EntryPoint, ".py", "")
	if v, ok := hp("sagemaker_submit_directory"); ok {
		s.SubmitDir = v.Str()
	}
	s.LogLevel = pyvalue.Int(defaultLogLevel)
	if v, ok := hp("sagemaker_container_log_level"); ok {
		s.LogLevel = v
	}
	s.SagemakerJobName = s.Name
	if v, ok := hp("sagemaker_job_name"); ok {
		s.SagemakerJobName = v.Str()
	}
	if v, ok := hp("sagemaker_region"); ok && v.Str() != "" {
		s.Region = v.Str()
	}
	if err := s.decodeDistribution(); err != nil {
		return nil, err
	}

	if rc := job.ResourceConfig; rc != nil {
		if len(rc.InstanceGroups) > 0 && string(rc.InstanceGroups) != "null" && string(rc.InstanceGroups) != "[]" {
			return nil, ClientErrorf("heterogeneous clusters (ResourceConfig.InstanceGroups) are not supported by sagebox; use InstanceType and InstanceCount")
		}
		if rc.InstanceType != "" {
			s.InstanceType = rc.InstanceType
		}
		s.VolumeSizeInGB = rc.VolumeSizeInGB
	}
	count := 1
	if job.ResourceConfig != nil && job.ResourceConfig.InstanceCount > 0 {
		count = job.ResourceConfig.InstanceCount
	}
	for i := 1; i <= count; i++ {
		s.Hosts = append(s.Hosts, "algo-"+strconv.Itoa(i))
	}

	jobMode := "File"
	if as := job.AlgorithmSpecification; as != nil {
		s.Metrics = as.MetricDefinitions
		if as.TrainingInputMode != "" {
			jobMode = as.TrainingInputMode
		}
	}
	seen := map[string]bool{}
	for _, ch := range job.InputDataConfig {
		c, err := newChannel(ch, jobMode)
		if err != nil {
			return nil, err
		}
		if seen[c.Name] {
			return nil, ClientErrorf("channel %q is given twice", c.Name)
		}
		seen[c.Name] = true
		s.Channels = append(s.Channels, c)
	}
	if o := job.OutputDataConfig; o != nil {
		s.OutputPath = o.S3OutputPath
		s.Compression = strings.ToUpper(o.CompressionType)
	}
	if sc := job.StoppingCondition; sc != nil && sc.MaxRuntimeInSeconds > 0 {
		s.MaxRuntime = time.Duration(sc.MaxRuntimeInSeconds) * time.Second
	}
	return s, nil
}

// distributionFlags are the sagemaker_*_enabled hyperparameters the
// PyTorch container knows, with the estimator's distribution option each
// comes from.
var distributionFlags = map[string]string{
	"sagemaker_mpi_enabled":                      "mpi",
	"sagemaker_pytorch_ddp_enabled":              "pytorchddp",
	"sagemaker_torch_distributed_enabled":        "torch_distributed",
	"sagemaker_distributed_dataparallel_enabled": "smdistributed dataparallel",
	"sagemaker_pytorch_xla_multi_worker_enabled": "pytorchxla",
	// Flags of the same form that are not distributions.
	"sagemaker_toolkit_native_launcher_enabled": "-",
	"sagemaker_training_compiler_enabled":       "-",
}

// decodeDistribution picks the launcher the way PTK training.py does:
// mpi > pytorch_ddp > torch_distributed > smdistributed dataparallel. A
// sagemaker_*_enabled flag the PyTorch container does not know (another
// framework's, such as TensorFlow's parameter_server) is refused: the
// toolkit would ignore it and run the script once per host, uncoordinated.
func (s *Spec) decodeDistribution() error {
	flag := func(k string) bool { v, ok := s.HyperParameters.Get(k); return ok && v.Truthy() }
	for _, k := range s.HyperParameters.Keys() {
		if strings.HasPrefix(k, "sagemaker_") && strings.HasSuffix(k, "_enabled") && distributionFlags[k] == "" && flag(k) {
			return ClientErrorf("hyperparameter %s asks for a distribution the PyTorch container does not have; "+
				"use distribution torch_distributed (sagemaker_torch_distributed_enabled), mpi (sagemaker_mpi_enabled), "+
				"pytorchddp or smdistributed dataparallel (sagemaker_distributed_dataparallel_enabled), or none", k)
		}
	}
	switch {
	case flag("sagemaker_mpi_enabled"):
		s.Dist, s.DistName = DistMPI, "mpi"
	case flag("sagemaker_pytorch_ddp_enabled"):
		s.Dist, s.DistName = DistMPI, "pytorchddp"
	case flag("sagemaker_torch_distributed_enabled"):
		s.Dist, s.DistName = DistTorch, "torch_distributed"
	case flag("sagemaker_distributed_dataparallel_enabled"):
		s.Dist, s.DistName = DistMPI, "smdistributed dataparallel"
	}
	s.Distributed = s.Dist != DistNone || flag("sagemaker_pytorch_xla_multi_worker_enabled")
	if v, ok := s.HyperParameters.Get("sagemaker_mpi_num_of_processes_per_host"); ok {
		if n, err := strconv.Atoi(v.Str()); err == nil && n > 0 {
			s.ProcsPerHost = n
		}
	}
	for _, k := range []string{"sagemaker_mpi_custom_mpi_options", "sagemaker_distributed_dataparallel_custom_mpi_options"} {
		if v, ok := s.HyperParameters.Get(k); ok && v.Str() != "" {
			s.MPIOptions = v.Str()
		}
	}
	_, hasMP := s.HyperParameters.Get("mp_parameters")
	s.ModelParallel = flag("sagemaker_mpi_enabled") && hasMP
	return nil
}

func newChannel(ch sagebox.Channel, jobMode string) (Channel, error) {
	c := Channel{
		Name:          ch.ChannelName,
		ContentType:   ch.ContentType,
		Compression:   ch.CompressionType,
		RecordWrapper: ch.RecordWrapperType,
		InputMode:     jobMode,
	}
	if !channelNameRE.MatchString(c.Name) {
		return c, ClientErrorf("channel name %q must match [A-Za-z0-9.-_]{1,64}", c.Name)
	}
	if ch.InputMode != "" {
		c.InputMode = ch.InputMode
	}
	switch c.InputMode {
	case "File", "FastFile":
		c.InputMode = "File" // FastFile is written as File (DG)
	case "Pipe":
		return c, ClientErrorf("channel %q: Pipe input mode is not supported by sagebox; use File or FastFile", c.Name)
	default:
		return c, ClientErrorf("channel %q: unknown input mode %q", c.Name, c.InputMode)
	}
	if c.RecordWrapper == "" {
		c.RecordWrapper = "None"
	}
	if ch.DataSource == nil || ch.DataSource.S3DataSource == nil {
		return c, ClientErrorf("channel %q: only S3DataSource (s3:// or file://) is supported", c.Name)
	}
	src := ch.DataSource.S3DataSource
	c.URI = src.S3Uri
	c.DataType = src.S3DataType
	if c.DataType == "" {
		c.DataType = "S3Prefix"
	}
	if c.DataType != "S3Prefix" && c.DataType != "ManifestFile" {
		return c, ClientErrorf("channel %q: S3DataType %s is not supported (S3Prefix and ManifestFile are)", c.Name, c.DataType)
	}
	c.Distribution = src.S3DataDistributionType
	if c.Distribution == "" {
		c.Distribution = "FullyReplicated"
	}
	if c.Distribution != "FullyReplicated" && c.Distribution != "ShardedByS3Key" {
		return c, ClientErrorf("channel %q: unknown S3DataDistributionType %q", c.Name, c.Distribution)
	}
	if !strings.HasPrefix(c.URI, "s3://") && !strings.HasPrefix(c.URI, "file://") {
		return c, ClientErrorf("channel %q: S3Uri %q must start with s3:// or file://", c.Name, c.URI)
	}
	return c, nil
}

// Error is a job failure whose FailureReason (Reason) is already
// formatted; Err is its cause.
type Error struct {
	Reason string
	Err    error
}

// Error is the FailureReason.
func (e *Error) Error() string { return e.Reason }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// FailureReason is the job's FailureReason for this error.
func (e *Error) FailureReason() string { return e.Reason }

// ClientErrorf is a failure caused by the job's own configuration or data:
// its FailureReason is "ClientError: " and the message.
func ClientErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Reason: "ClientError: " + err.Error(), Err: err}
}

// Reason is the formatted FailureReason err carries when it is (or
// wraps) an *Error.
func Reason(err error) (string, bool) {
	var je *Error
	if errors.As(err, &je) {
		return je.Reason, true
	}
	return "", false
}
