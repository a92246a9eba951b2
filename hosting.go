package sagebox

import "encoding/json"

// Model is a SageMaker model as CreateModel takes it and DescribeModel
// returns it. Exactly one of PrimaryContainer and Containers is set.
type Model struct {
	ModelName                string                    `json:"ModelName"`
	ModelArn                 string                    `json:"ModelArn,omitempty"`
	ExecutionRoleArn         string                    `json:"ExecutionRoleArn,omitempty"`
	PrimaryContainer         *ContainerDefinition      `json:"PrimaryContainer,omitempty"`
	Containers               []ContainerDefinition     `json:"Containers,omitempty"`
	InferenceExecutionConfig *InferenceExecutionConfig `json:"InferenceExecutionConfig,omitempty"`
	VpcConfig                RawJSON                   `json:"VpcConfig,omitempty"`
	EnableNetworkIsolation   bool                      `json:"EnableNetworkIsolation"`
	CreationTime             *Time                     `json:"CreationTime,omitempty"`
	// Tags is only read from CreateModel; the tag table keeps them.
	Tags []Tag `json:"Tags,omitempty"`
}

// ContainerList returns the model's containers in order: PrimaryContainer
// alone, or Containers.
func (m *Model) ContainerList() []ContainerDefinition {
	if m.PrimaryContainer != nil {
		return []ContainerDefinition{*m.PrimaryContainer}
	}
	return m.Containers
}

// ContainerDefinition is one container of a model.
type ContainerDefinition struct {
	ContainerHostname string            `json:"ContainerHostname,omitempty"`
	Image             string            `json:"Image,omitempty"`
	ImageConfig       RawJSON           `json:"ImageConfig,omitempty"`
	Mode              string            `json:"Mode,omitempty"`
	ModelDataUrl      string            `json:"ModelDataUrl,omitempty"`
	ModelDataSource   *ModelDataSource  `json:"ModelDataSource,omitempty"`
	Environment       map[string]string `json:"Environment,omitempty"`
	ModelPackageName  string            `json:"ModelPackageName,omitempty"`
}

// ModelDataSource points a container at uncompressed model data.
type ModelDataSource struct {
	S3DataSource *S3ModelDataSource `json:"S3DataSource,omitempty"`
}

// S3ModelDataSource is model data under an S3 prefix (S3DataType
// "S3Prefix", CompressionType "None") or one object ("S3Object", with
// CompressionType "None" or "Gzip").
type S3ModelDataSource struct {
	S3Uri             string  `json:"S3Uri"`
	S3DataType        string  `json:"S3DataType"`
	CompressionType   string  `json:"CompressionType"`
	ModelAccessConfig RawJSON `json:"ModelAccessConfig,omitempty"`
}

// InferenceExecutionConfig says how a multi-container model runs.
type InferenceExecutionConfig struct {
	Mode string `json:"Mode"` // InferenceModeSerial or InferenceModeDirect
}

// InferenceExecutionConfig modes.
const (
	InferenceModeSerial = "Serial"
	InferenceModeDirect = "Direct"
)

// MaxContainers is the most containers a model may have.
const MaxContainers = 15

// EndpointConfig is an endpoint configuration. ProductionVariants is kept
// exactly as the client sent it: the SDK sends DescribeEndpointConfig's
// variants back to CreateEndpointConfig, and botocore rejects any member
// it did not send. Variants decodes them.
type EndpointConfig struct {
	EndpointConfigName   string  `json:"EndpointConfigName"`
	EndpointConfigArn    string  `json:"EndpointConfigArn,omitempty"`
	ProductionVariants   RawJSON `json:"ProductionVariants"`
	KmsKeyId             string  `json:"KmsKeyId,omitempty"`
	DataCaptureConfig    RawJSON `json:"DataCaptureConfig,omitempty"`
	AsyncInferenceConfig RawJSON `json:"AsyncInferenceConfig,omitempty"`
	ExplainerConfig      RawJSON `json:"ExplainerConfig,omitempty"`
	ExecutionRoleArn     string  `json:"ExecutionRoleArn,omitempty"`
	VpcConfig            RawJSON `json:"VpcConfig,omitempty"`
	// EnableNetworkIsolation is a pointer so that it is echoed only when sent.
	EnableNetworkIsolation *bool `json:"EnableNetworkIsolation,omitempty"`
	CreationTime           *Time `json:"CreationTime,omitempty"`
	// Tags is only read from CreateEndpointConfig.
	Tags []Tag `json:"Tags,omitempty"`
}

// Variants decodes ProductionVariants.
func (c *EndpointConfig) Variants() ([]ProductionVariant, error) {
	var vs []ProductionVariant
	if err := json.Unmarshal(c.ProductionVariants, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// ProductionVariant is the part of a config's variant sagebox acts on.
// Weights are pointers to tell "not sent" (weight 1) from 0.
type ProductionVariant struct {
	VariantName          string   `json:"VariantName"`
	ModelName            string   `json:"ModelName"`
	InitialInstanceCount *int     `json:"InitialInstanceCount,omitempty"`
	InstanceType         string   `json:"InstanceType,omitempty"`
	InitialVariantWeight *float64 `json:"InitialVariantWeight,omitempty"`
}

// Endpoint is an endpoint as DescribeEndpoint returns it. Internal is
// sagebox's own record (stored, never in the API's shape).
type Endpoint struct {
	EndpointName       string                     `json:"EndpointName"`
	EndpointArn        string                     `json:"EndpointArn"`
	EndpointConfigName string                     `json:"EndpointConfigName"`
	ProductionVariants []ProductionVariantSummary `json:"ProductionVariants,omitempty"`
	EndpointStatus     string                     `json:"EndpointStatus"`
	FailureReason      string                     `json:"FailureReason,omitempty"`
	CreationTime       *Time                      `json:"CreationTime,omitempty"`
	LastModifiedTime   *Time                      `json:"LastModifiedTime,omitempty"`
	// Tags is only read from CreateEndpoint.
	Tags []Tag `json:"Tags,omitempty"`

	Internal EndpointInternal `json:"-"`
}

// ProductionVariantSummary is a variant's runtime state in DescribeEndpoint.
type ProductionVariantSummary struct {
	VariantName          string          `json:"VariantName"`
	DeployedImages       []DeployedImage `json:"DeployedImages,omitempty"`
	CurrentWeight        float64         `json:"CurrentWeight"`
	DesiredWeight        float64         `json:"DesiredWeight"`
	CurrentInstanceCount int             `json:"CurrentInstanceCount"`
	DesiredInstanceCount int             `json:"DesiredInstanceCount"`
}

// DeployedImage is an image a variant runs.
type DeployedImage struct {
	SpecifiedImage string `json:"SpecifiedImage,omitempty"`
	ResolvedImage  string `json:"ResolvedImage,omitempty"`
	ResolutionTime *Time  `json:"ResolutionTime,omitempty"`
}

// EndpointStatus values.
const (
	EndpointCreating     = "Creating"
	EndpointInService    = "InService"
	EndpointUpdating     = "Updating"
	EndpointSystemUpdate = "SystemUpdating"
	EndpointRollingBack  = "RollingBack"
	EndpointDeleting     = "Deleting"
	EndpointFailed       = "Failed"
	EndpointOutOfService = "OutOfService"
)

// EndpointInternal is the desired state of an endpoint: what it serves now
// (Current) and, while Creating or Updating, what it is moving to
// (Pending). Both are snapshots taken when the deployment was asked for,
// so that deleting the config or a model later (allowed, as on AWS) does
// not change what the endpoint serves, even after a restart.
type EndpointInternal struct {
	Current *Deployment `json:"Current,omitempty"`
	Pending *Deployment `json:"Pending,omitempty"`
	// Generations counts deployments asked for; each gets the next number.
	Generations int `json:"Generations,omitempty"`
}

// Deployment is one endpoint config resolved with its models.
type Deployment struct {
	Generation         int               `json:"Generation"`
	EndpointConfigName string            `json:"EndpointConfigName"`
	Variants           []DeployedVariant `json:"Variants"`
}

// Variant returns the named variant, or nil.
func (d *Deployment) Variant(name string) *DeployedVariant {
	if d == nil {
		return nil
	}
	for i := range d.Variants {
		if d.Variants[i].VariantName == name {
			return &d.Variants[i]
		}
	}
	return nil
}

// DeployedVariant is a variant with its model as it was when deployed.
type DeployedVariant struct {
	VariantName   string  `json:"VariantName"`
	InstanceType  string  `json:"InstanceType"`
	InstanceCount int     `json:"InstanceCount"`
	Weight        float64 `json:"Weight"`
	Model         Model   `json:"Model"`
}
