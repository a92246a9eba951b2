// Package controlplane serves the AWS JSON 1.1 APIs of sagebox's control
// plane: the SageMaker operations (X-Amz-Target "SageMaker.<Op>") and the
// CloudWatch Logs operations that log streaming uses ("Logs_20140328.<Op>").
// boto3, the AWS CLI, aws-sdk-go-v2 and the SageMaker Python SDK talk to it
// unchanged when pointed at sagebox's address.
//
// # Layout
//
//	handler.go            Handler, Config, Runner, New, ServeHTTP, IsJSONTarget
//	routes.go             the operation table: adding an operation is one line
//	encode.go             request decoding and response encoding, in one place
//	errors.go             error code → HTTP status, error bodies, in one place
//	validate.go           AWS-style constraint checks and their messages
//	training_jobs.go      Create/Describe/StopTrainingJob
//	training_list.go      ListTrainingJobs
//	training_validate.go  what CreateTrainingJob accepts, and its defaults
//	hosting.go            the Hosting interface; hosting's error messages
//	models.go             Create/Describe/DeleteModel and what CreateModel accepts
//	endpoint_configs.go   Create/Describe/DeleteEndpointConfig (variants kept as sent)
//	endpoints.go          Create/Describe/Update/DeleteEndpoint, UpdateEndpointWeightsAndCapacities
//	hosting_list.go       ListModels, ListEndpointConfigs, ListEndpoints
//	tags.go               AddTags, DeleteTags, ListTags for every taggable kind
//	logs.go               CreateLogGroup/Stream, PutLogEvents, DescribeLogGroups
//	logs_read.go          DescribeLogStreams, GetLogEvents, FilterLogEvents
//
// # Wire behaviour
//
// Every response carries Content-Type application/x-amz-json-1.1 and an
// x-amzn-RequestId. Errors are {"__type": code, "message": text} with the
// code repeated in x-amzn-ErrorType; client faults are 400, internal errors
// 500 InternalFailure (the cause is logged with the request id, never sent).
// Unknown members are ignored. SageMaker timestamps are epoch seconds (int or
// float accepted); CloudWatch Logs timestamps are epoch milliseconds.
// Constraint violations are reported as AWS reports them: "1 validation
// error detected: Value 'x' at 'trainingJobName' failed to satisfy
// constraint: ...", joined with "; " when there are several. SageMaker
// reports them as ValidationException, CloudWatch Logs as
// InvalidParameterException.
//
// # sagebox extensions and limits
//
//   - A channel's S3DataSource.S3Uri may also be a file:///absolute/path URI
//     naming data already on the machine.
//   - CreateTrainingJob needs the script to run: a sagemaker_program
//     hyperparameter (JSON-encoded as the SageMaker SDK sends it, or raw) or
//     SAGEMAKER_PROGRAM in Environment.
//   - InstanceCount is at most Config.MaxInstanceCount (default 16):
//     ResourceLimitExceeded beyond. Heterogeneous clusters (InstanceGroups)
//     and FileSystemDataSource channels are rejected.
//   - MetricDefinitions regexes must compile as Go (RE2) regular expressions.
//   - FilterLogEvents supports unstructured-text filter patterns: terms,
//     quoted phrases, ?term (OR), -term (NOT) and %regex%; JSON and
//     space-delimited patterns are rejected (see logstore.Pattern).
//   - Training job names are unique ignoring case, as their lower-cased ARNs
//     are.
//   - Models, endpoint configs and endpoints are unique ignoring case, each
//     kind in its own name space (estimator.deploy gives all three one
//     name). Missing ones answer ValidationException `Could not find
//     endpoint "arn:…:endpoint/<lower-cased name>".` (model, endpoint
//     configuration likewise), taken names `Cannot create already existing
//     model "arn:…".`, as SageMaker does; the SageMaker SDK matches both.
//   - DescribeEndpointConfig returns ProductionVariants exactly as
//     CreateEndpointConfig received them (compacted): the SDK sends them
//     back. Runtime weights and counts are only in DescribeEndpoint.
//   - An endpoint deploys a snapshot of its config and models, so
//     DeleteEndpointConfig and DeleteModel are allowed while it runs.
//     Snapshot containers without ContainerHostname get "primary"
//     (PrimaryContainer) or "container-<n>" (Containers); DescribeModel
//     still shows the model as sent.
//   - ModelDataUrl and ModelDataSource must be s3:// URIs in sagebox's
//     object store. Mode MultiModel, ModelPackageName, serverless variants
//     (no InstanceType) and ShadowProductionVariants are refused.
//     UpdateEndpoint's RetainAllVariantProperties, DeploymentConfig and
//     friends are accepted and ignored. ListEndpoints sorts by Name or
//     CreationTime, not Status.
//   - Without a Hosting (New's hosting nil) CreateEndpoint, UpdateEndpoint,
//     UpdateEndpointWeightsAndCapacities and DeleteEndpoint answer 503
//     ServiceUnavailable.
//   - ListTags/AddTags/DeleteTags on an ARN that names no resource here
//     (unknown name, kind, region, account or partition) answer
//     ValidationException "Requested resource not found: <arn>.". AddTags
//     past 50 tags on a resource changes nothing and answers
//     ValidationException. ListTags never pages (a resource has at most 50
//     tags, MaxResults is at least 50). DescribeTrainingJob does not echo
//     Tags, as AWS's does not: ListTags has them.
package controlplane
