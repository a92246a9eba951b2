package sagebox

import (
	"encoding/json"
	"time"
)

// TrainingJob is a training job as CreateTrainingJob receives it and
// DescribeTrainingJob returns it. Field names and JSON names follow the
// SageMaker API exactly, so the API layer decodes requests straight into it
// and encodes it back out. Members sagebox accepts but does not act on
// (DebugHookConfig, ProfilerConfig, VpcConfig, ...) are kept verbatim as raw
// JSON and echoed.
//
// Status diagram (TrainingJobStatus / SecondaryStatus):
//
//	InProgress/Starting ─▶ InProgress/Downloading ─▶ InProgress/Training ─▶ InProgress/Uploading ─▶ Completed/Completed
//	        │                      │                         │                        │
//	        └──────────────────────┴────────────┬────────────┴────────────────────────┘
//	                                            ├─▶ Failed/Failed            (error, FailureReason set)
//	                                            ├─▶ Stopping/Stopping ─▶ Stopped/Stopped       (StopTrainingJob)
//	                                            └─▶ Stopping/MaxRuntimeExceeded ─▶ Stopped/MaxRuntimeExceeded
type TrainingJob struct {
	TrainingJobName        string                  `json:"TrainingJobName"`
	TrainingJobArn         string                  `json:"TrainingJobArn,omitempty"`
	AlgorithmSpecification *AlgorithmSpecification `json:"AlgorithmSpecification,omitempty"`
	RoleArn                string                  `json:"RoleArn,omitempty"`
	HyperParameters        map[string]string       `json:"HyperParameters,omitempty"`
	InputDataConfig        []Channel               `json:"InputDataConfig,omitempty"`
	OutputDataConfig       *OutputDataConfig       `json:"OutputDataConfig,omitempty"`
	ResourceConfig         *ResourceConfig         `json:"ResourceConfig,omitempty"`
	StoppingCondition      *StoppingCondition      `json:"StoppingCondition,omitempty"`
	Environment            map[string]string       `json:"Environment,omitempty"`
	CheckpointConfig       *CheckpointConfig       `json:"CheckpointConfig,omitempty"`
	// Tags are the request's. The metadata store keeps a resource's tags
	// apart from it, keyed by ARN (ListTags/AddTags/DeleteTags); a stored
	// job has none here and DescribeTrainingJob, like AWS's, shows none.
	Tags          []Tag          `json:"Tags,omitempty"`
	RetryStrategy *RetryStrategy `json:"RetryStrategy,omitempty"`

	// Always encoded, false included, as AWS returns them.
	EnableNetworkIsolation                bool `json:"EnableNetworkIsolation"`
	EnableInterContainerTrafficEncryption bool `json:"EnableInterContainerTrafficEncryption"`
	EnableManagedSpotTraining             bool `json:"EnableManagedSpotTraining"`

	// Accepted and echoed, otherwise ignored.
	VpcConfig                  RawJSON `json:"VpcConfig,omitempty"`
	DebugHookConfig            RawJSON `json:"DebugHookConfig,omitempty"`
	DebugRuleConfigurations    RawJSON `json:"DebugRuleConfigurations,omitempty"`
	ProfilerConfig             RawJSON `json:"ProfilerConfig,omitempty"`
	ProfilerRuleConfigurations RawJSON `json:"ProfilerRuleConfigurations,omitempty"`
	TensorBoardOutputConfig    RawJSON `json:"TensorBoardOutputConfig,omitempty"`
	ExperimentConfig           RawJSON `json:"ExperimentConfig,omitempty"`

	// Set by sagebox.
	TrainingJobStatus          string             `json:"TrainingJobStatus,omitempty"`
	SecondaryStatus            string             `json:"SecondaryStatus,omitempty"`
	SecondaryStatusTransitions []StatusTransition `json:"SecondaryStatusTransitions,omitempty"`
	FailureReason              string             `json:"FailureReason,omitempty"`
	ModelArtifacts             *ModelArtifacts    `json:"ModelArtifacts,omitempty"`
	FinalMetricDataList        []MetricData       `json:"FinalMetricDataList,omitempty"`
	CreationTime               *Time              `json:"CreationTime,omitempty"`
	TrainingStartTime          *Time              `json:"TrainingStartTime,omitempty"`
	TrainingEndTime            *Time              `json:"TrainingEndTime,omitempty"`
	LastModifiedTime           *Time              `json:"LastModifiedTime,omitempty"`
	TrainingTimeInSeconds      *int64             `json:"TrainingTimeInSeconds,omitempty"`
	BillableTimeInSeconds      *int64             `json:"BillableTimeInSeconds,omitempty"`
	ProfilingStatus            string             `json:"ProfilingStatus,omitempty"`

	// Internal is sagebox's own record of the job (the stop reason). The
	// metadata store keeps it; the API never shows it.
	Internal JobInternal `json:"-"`
}

// RawJSON is a JSON value kept verbatim.
type RawJSON = json.RawMessage

// AlgorithmSpecification says what runs. sagebox runs the training script
// named by the sagemaker_program hyperparameter whatever the image is;
// TrainingImage is recorded.
type AlgorithmSpecification struct {
	TrainingImage                    string             `json:"TrainingImage,omitempty"`
	AlgorithmName                    string             `json:"AlgorithmName,omitempty"`
	TrainingInputMode                string             `json:"TrainingInputMode,omitempty"`
	MetricDefinitions                []MetricDefinition `json:"MetricDefinitions,omitempty"`
	EnableSageMakerMetricsTimeSeries bool               `json:"EnableSageMakerMetricsTimeSeries,omitempty"`
	ContainerEntrypoint              []string           `json:"ContainerEntrypoint,omitempty"`
	ContainerArguments               []string           `json:"ContainerArguments,omitempty"`
	TrainingImageConfig              RawJSON            `json:"TrainingImageConfig,omitempty"`
}

// MetricDefinition is a named regex matched against every log line; its
// first capture group is the value.
type MetricDefinition struct {
	Name  string `json:"Name"`
	Regex string `json:"Regex"`
}

// Channel is one named input of a training job.
type Channel struct {
	ChannelName       string         `json:"ChannelName"`
	DataSource        *DataSource    `json:"DataSource,omitempty"`
	ContentType       string         `json:"ContentType,omitempty"`
	CompressionType   string         `json:"CompressionType,omitempty"`
	RecordWrapperType string         `json:"RecordWrapperType,omitempty"`
	InputMode         string         `json:"InputMode,omitempty"`
	ShuffleConfig     *ShuffleConfig `json:"ShuffleConfig,omitempty"`
}

// DataSource is where a channel's data lives.
type DataSource struct {
	S3DataSource         *S3DataSource `json:"S3DataSource,omitempty"`
	FileSystemDataSource RawJSON       `json:"FileSystemDataSource,omitempty"`
}

// S3DataSource names objects by prefix or manifest. sagebox also accepts
// file:// URIs for data already on the machine.
type S3DataSource struct {
	S3DataType             string   `json:"S3DataType"`
	S3Uri                  string   `json:"S3Uri"`
	S3DataDistributionType string   `json:"S3DataDistributionType,omitempty"`
	AttributeNames         []string `json:"AttributeNames,omitempty"`
	InstanceGroupNames     []string `json:"InstanceGroupNames,omitempty"`
}

// ShuffleConfig is accepted and echoed.
type ShuffleConfig struct {
	Seed int64 `json:"Seed"`
}

// OutputDataConfig says where artifacts go.
type OutputDataConfig struct {
	S3OutputPath string `json:"S3OutputPath"`
	// KmsKeyId is always encoded, "" when unset, as AWS returns it: the
	// SageMaker SDK's attach reads it by index.
	KmsKeyId        string `json:"KmsKeyId"`
	CompressionType string `json:"CompressionType,omitempty"`
}

// ResourceConfig is the (simulated) cluster: InstanceCount hosts algo-1..N.
type ResourceConfig struct {
	InstanceType             string  `json:"InstanceType,omitempty"`
	InstanceCount            int     `json:"InstanceCount,omitempty"`
	VolumeSizeInGB           int     `json:"VolumeSizeInGB,omitempty"`
	VolumeKmsKeyId           string  `json:"VolumeKmsKeyId,omitempty"`
	KeepAlivePeriodInSeconds int     `json:"KeepAlivePeriodInSeconds,omitempty"`
	InstanceGroups           RawJSON `json:"InstanceGroups,omitempty"`
}

// StoppingCondition bounds a job's run time.
type StoppingCondition struct {
	MaxRuntimeInSeconds     int `json:"MaxRuntimeInSeconds,omitempty"`
	MaxWaitTimeInSeconds    int `json:"MaxWaitTimeInSeconds,omitempty"`
	MaxPendingTimeInSeconds int `json:"MaxPendingTimeInSeconds,omitempty"`
}

// CheckpointConfig is synced with the job's checkpoint directory.
type CheckpointConfig struct {
	S3Uri     string `json:"S3Uri"`
	LocalPath string `json:"LocalPath,omitempty"`
}

// Tag is a key/value label.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// RetryStrategy is accepted and echoed.
type RetryStrategy struct {
	MaximumRetryAttempts int `json:"MaximumRetryAttempts"`
}

// StatusTransition is one entry of SecondaryStatusTransitions.
type StatusTransition struct {
	Status        string `json:"Status"`
	StartTime     *Time  `json:"StartTime"`
	EndTime       *Time  `json:"EndTime,omitempty"`
	StatusMessage string `json:"StatusMessage"`
}

// ModelArtifacts points at model.tar.gz.
type ModelArtifacts struct {
	S3ModelArtifacts string `json:"S3ModelArtifacts"`
}

// MetricData is one metric value.
type MetricData struct {
	MetricName string  `json:"MetricName"`
	Value      float64 `json:"Value"`
	Timestamp  *Time   `json:"Timestamp"`
}

// TrainingJobStatus values.
const (
	StatusInProgress = "InProgress"
	StatusCompleted  = "Completed"
	StatusFailed     = "Failed"
	StatusStopping   = "Stopping"
	StatusStopped    = "Stopped"
)

// SecondaryStatus values sagebox produces.
const (
	SecondaryStarting           = "Starting"
	SecondaryDownloading        = "Downloading"
	SecondaryTraining           = "Training"
	SecondaryUploading          = "Uploading"
	SecondaryCompleted          = "Completed"
	SecondaryFailed             = "Failed"
	SecondaryStopping           = "Stopping"
	SecondaryStopped            = "Stopped"
	SecondaryMaxRuntimeExceeded = "MaxRuntimeExceeded"
)

// Terminal reports whether a job in this TrainingJobStatus will not change again.
func Terminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusStopped
}

// LogEvent is one log line with its time in epoch milliseconds.
type LogEvent struct {
	Timestamp int64  `json:"timestamp"`
	Message   string `json:"message"`
}

// TrainingLogGroup is the CloudWatch log group of training jobs.
const TrainingLogGroup = "/aws/sagemaker/TrainingJobs"

// MetricPoint is one value of a metric matched in a job's logs.
type MetricPoint struct {
	Name      string
	Value     float64
	Timestamp time.Time
}
