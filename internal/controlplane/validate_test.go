package controlplane_test

import (
	"fmt"
	"strings"
	"testing"
)

// prefix1 starts every single-violation message.
const prefix1 = "1 validation error detected: "

// at builds one violation as AWS words it.
func at(value, path, constraint string) string {
	return "Value " + value + " at '" + path + "' failed to satisfy constraint: " + constraint
}

// channel returns one valid channel, mutated by fn.
func channel(fn func(c, s3 map[string]any)) map[string]any {
	s3 := map[string]any{"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/data"}
	c := map[string]any{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": s3}}
	fn(c, s3)
	return c
}

func stringMap(n int, key func(i int) string, value string) map[string]any {
	m := map[string]any{"sagemaker_program": "train.py"}
	for i := 0; len(m) < n; i++ {
		m[key(i)] = value
	}
	return m
}

// TestCreateTrainingJobValidation checks each rule of CreateTrainingJob and
// its exact message.
func TestCreateTrainingJobValidation(t *testing.T) {
	namePattern := "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
	long := strings.Repeat("a", 64)
	tests := []struct {
		name   string
		mutate func(req map[string]any)
		code   string
		msg    string
	}{
		{"name missing", func(r map[string]any) { delete(r, "TrainingJobName") }, "ValidationException",
			prefix1 + at("null", "trainingJobName", "Member must not be null")},
		{"name with underscore", func(r map[string]any) { r["TrainingJobName"] = "my_job" }, "ValidationException",
			prefix1 + at("'my_job'", "trainingJobName", namePattern)},
		{"name leading hyphen", func(r map[string]any) { r["TrainingJobName"] = "-job" }, "ValidationException",
			prefix1 + at("'-job'", "trainingJobName", namePattern)},
		{"name too long", func(r map[string]any) { r["TrainingJobName"] = long }, "ValidationException",
			"2 validation errors detected: " + at("'"+long+"'", "trainingJobName", "Member must have length less than or equal to 63") +
				"; " + at("'"+long+"'", "trainingJobName", namePattern)},
		{"name 63 ok", func(r map[string]any) { r["TrainingJobName"] = long[:63] }, "", ""},
		{"role missing", func(r map[string]any) { delete(r, "RoleArn") }, "ValidationException",
			prefix1 + at("null", "roleArn", "Member must not be null")},
		{"role pattern", func(r map[string]any) { r["RoleArn"] = "arn:aws:iam::12345:role/Role-Name" }, "ValidationException",
			prefix1 + at("'arn:aws:iam::12345:role/Role-Name'", "roleArn", `Member must satisfy regular expression pattern: ^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)},
		{"role too short", func(r map[string]any) { r["RoleArn"] = "role" }, "ValidationException",
			"2 validation errors detected: " + at("'role'", "roleArn", "Member must have length greater than or equal to 20") + "; " +
				at("'role'", "roleArn", `Member must satisfy regular expression pattern: ^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)},
		{"output missing", func(r map[string]any) { delete(r, "OutputDataConfig") }, "ValidationException",
			prefix1 + at("null", "outputDataConfig", "Member must not be null")},
		{"output path missing", func(r map[string]any) { r["OutputDataConfig"] = map[string]any{} }, "ValidationException",
			prefix1 + at("null", "outputDataConfig.s3OutputPath", "Member must not be null")},
		{"output path not s3", func(r map[string]any) { r["OutputDataConfig"] = map[string]any{"S3OutputPath": "/tmp/out"} }, "ValidationException",
			prefix1 + at("'/tmp/out'", "outputDataConfig.s3OutputPath", "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$")},
		{"output compression", func(r map[string]any) {
			r["OutputDataConfig"] = map[string]any{"S3OutputPath": "s3://b", "CompressionType": "ZIP"}
		}, "ValidationException", prefix1 + at("'ZIP'", "outputDataConfig.compressionType", "Member must satisfy enum value set: [GZIP, NONE]")},
		{"input mode missing", func(r map[string]any) { r["AlgorithmSpecification"] = map[string]any{"TrainingImage": "img"} }, "ValidationException",
			prefix1 + at("null", "algorithmSpecification.trainingInputMode", "Member must not be null")},
		{"input mode enum", func(r map[string]any) {
			r["AlgorithmSpecification"] = map[string]any{"TrainingImage": "img", "TrainingInputMode": "Stream"}
		}, "ValidationException", prefix1 + at("'Stream'", "algorithmSpecification.trainingInputMode", "Member must satisfy enum value set: [Pipe, File, FastFile]")},
		{"no image nor algorithm", func(r map[string]any) { r["AlgorithmSpecification"] = map[string]any{"TrainingInputMode": "File"} }, "ValidationException",
			"Either AlgorithmName or TrainingImage must be specified in AlgorithmSpecification."},
		{"algorithm spec absent", func(r map[string]any) { delete(r, "AlgorithmSpecification") }, "ValidationException",
			prefix1 + at("null", "algorithmSpecification", "Member must not be null")},
		{"image too long", func(r map[string]any) {
			r["AlgorithmSpecification"] = map[string]any{"TrainingImage": strings.Repeat("i", 256), "TrainingInputMode": "File"}
		}, "ValidationException", prefix1 + at("'"+strings.Repeat("i", 256)+"'", "algorithmSpecification.trainingImage", "Member must have length less than or equal to 255")},
		{"metric regex missing", func(r map[string]any) {
			r["AlgorithmSpecification"] = map[string]any{"TrainingImage": "i", "TrainingInputMode": "File", "MetricDefinitions": []any{map[string]any{"Name": "loss"}}}
		}, "ValidationException", prefix1 + at("null", "algorithmSpecification.metricDefinitions.1.member.regex", "Member must not be null")},
		{"metric regex not RE2", func(r map[string]any) {
			r["AlgorithmSpecification"] = map[string]any{"TrainingImage": "i", "TrainingInputMode": "File", "MetricDefinitions": []any{map[string]any{"Name": "loss", "Regex": "loss=(?<v>.*)("}}}
		}, "ValidationException", "The regular expression of metric \"loss\" does not compile in sagebox (Go RE2 syntax)"},
		{"too many metrics", func(r map[string]any) {
			var defs []any
			for i := 0; i < 41; i++ {
				defs = append(defs, map[string]any{"Name": fmt.Sprint("m", i), "Regex": "x=(.*)"})
			}
			r["AlgorithmSpecification"] = map[string]any{"TrainingImage": "i", "TrainingInputMode": "File", "MetricDefinitions": defs}
		}, "ValidationException", "at 'algorithmSpecification.metricDefinitions' failed to satisfy constraint: Member must have length less than or equal to 40"},
		{"hyperparameters 100 ok", func(r map[string]any) {
			r["HyperParameters"] = stringMap(100, func(i int) string { return fmt.Sprint("k", i) }, "v")
		}, "", ""},
		{"hyperparameters 101", func(r map[string]any) {
			r["HyperParameters"] = stringMap(101, func(i int) string { return fmt.Sprint("k", i) }, "v")
		}, "ValidationException", "at 'hyperParameters' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"hyperparameter key 257", func(r map[string]any) {
			r["HyperParameters"] = map[string]any{"sagemaker_program": "t.py", strings.Repeat("k", 257): "v"}
		}, "ValidationException", "at 'hyperParameters' failed to satisfy constraint: Map keys must satisfy constraint: [Member must have length less than or equal to 256, Member must have length greater than or equal to 0, Member must satisfy regular expression pattern: .*]"},
		{"hyperparameter value 2501", func(r map[string]any) {
			r["HyperParameters"] = map[string]any{"sagemaker_program": "t.py", "big": strings.Repeat("v", 2501)}
		}, "ValidationException", "at 'hyperParameters' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 2500, Member must have length greater than or equal to 0, Member must satisfy regular expression pattern: .*]"},
		{"hyperparameter value 2500 ok", func(r map[string]any) {
			r["HyperParameters"] = map[string]any{"sagemaker_program": "t.py", "big": strings.Repeat("v", 2500)}
		}, "", ""},
		{"environment 49", func(r map[string]any) {
			r["Environment"] = stringMap(49, func(i int) string { return fmt.Sprint("K", i) }, "v")
		}, "ValidationException", "at 'environment' failed to satisfy constraint: Member must have length less than or equal to 48"},
		{"environment key", func(r map[string]any) { r["Environment"] = map[string]any{"1BAD": "v"} }, "ValidationException",
			prefix1 + at("'{1BAD=v}'", "environment", "Map keys must satisfy constraint: [Member must have length less than or equal to 512, Member must have length greater than or equal to 0, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]")},
		{"environment value 513", func(r map[string]any) { r["Environment"] = map[string]any{"K": strings.Repeat("v", 513)} }, "ValidationException",
			"Map value must satisfy constraint: [Member must have length less than or equal to 512"},
		{"instance count 0", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 0, "VolumeSizeInGB": 30}
		}, "ValidationException", prefix1 + at("'0'", "resourceConfig.instanceCount", "Member must have value greater than or equal to 1")},
		{"instance count over sagebox limit", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 17, "VolumeSizeInGB": 30}
		}, "ResourceLimitExceeded", "The sagebox limit on instances per training job is 16; the request asked for 17 instances."},
		{"instance count 16 ok", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 16}
		}, "", ""},
		{"instance type", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "local", "InstanceCount": 1}
		}, "ValidationException", prefix1 + at("'local'", "resourceConfig.instanceType", `Member must satisfy regular expression pattern: ml\..+`)},
		{"volume 0", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 0}
		},
			"ValidationException", prefix1 + at("'0'", "resourceConfig.volumeSizeInGB", "Member must have value greater than or equal to 1")},
		{"keep alive 3601", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "KeepAlivePeriodInSeconds": 3601}
		}, "ValidationException", prefix1 + at("'3601'", "resourceConfig.keepAlivePeriodInSeconds", "Member must have value less than or equal to 3600")},
		{"instance groups", func(r map[string]any) {
			r["ResourceConfig"] = map[string]any{"InstanceGroups": []any{map[string]any{"InstanceGroupName": "a", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1}}, "VolumeSizeInGB": 30}
		}, "ValidationException", "sagebox does not support heterogeneous clusters: use InstanceCount instead of InstanceGroups."},
		{"resource config absent", func(r map[string]any) { delete(r, "ResourceConfig") }, "ValidationException",
			prefix1 + at("null", "resourceConfig", "Member must not be null")},
		{"instance type absent", func(r map[string]any) { r["ResourceConfig"] = map[string]any{"InstanceCount": 1, "VolumeSizeInGB": 30} },
			"ValidationException", prefix1 + at("null", "resourceConfig.instanceType", "Member must not be null")},
		{"max runtime 0", func(r map[string]any) { r["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": 0} }, "ValidationException",
			prefix1 + at("'0'", "stoppingCondition.maxRuntimeInSeconds", "Member must have value greater than or equal to 1")},
		{"max runtime negative", func(r map[string]any) { r["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": -5} }, "ValidationException",
			prefix1 + at("'-5'", "stoppingCondition.maxRuntimeInSeconds", "Member must have value greater than or equal to 1")},
		{"stopping condition absent ok", func(r map[string]any) { delete(r, "StoppingCondition") }, "", ""},
		{"channels empty", func(r map[string]any) { r["InputDataConfig"] = []any{} }, "ValidationException",
			prefix1 + at("'[]'", "inputDataConfig", "Member must have length greater than or equal to 1")},
		{"channel name", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(c, _ map[string]any) { c["ChannelName"] = "my channel" })}
		}, "ValidationException", prefix1 + at("'my channel'", "inputDataConfig.1.member.channelName", `Member must satisfy regular expression pattern: [A-Za-z0-9\.\-_]+`)},
		{"channel names unique", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, _ map[string]any) {}), channel(func(_, _ map[string]any) {})}
		}, "ValidationException", `Channel names must be unique: InputDataConfig has more than one channel named "train".`},
		{"channel data source missing", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(c, _ map[string]any) { delete(c, "DataSource") })}
		}, "ValidationException", prefix1 + at("null", "inputDataConfig.1.member.dataSource", "Member must not be null")},
		{"channel file system source", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(c, _ map[string]any) {
				c["DataSource"] = map[string]any{"FileSystemDataSource": map[string]any{"FileSystemId": "fs-1"}}
			})}
		}, "ValidationException", `Channel "train" has no S3DataSource: sagebox supports only S3DataSource channels (s3:// or file:// URIs), not FileSystemDataSource.`},
		{"channel s3 data type", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, s3 map[string]any) { s3["S3DataType"] = "Prefix" })}
		}, "ValidationException", prefix1 + at("'Prefix'", "inputDataConfig.1.member.dataSource.s3DataSource.s3DataType", "Member must satisfy enum value set: [ManifestFile, S3Prefix, AugmentedManifestFile]")},
		{"channel uri", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, s3 map[string]any) { s3["S3Uri"] = "gs://bucket/data" })}
		}, "ValidationException", prefix1 + at("'gs://bucket/data'", "inputDataConfig.1.member.dataSource.s3DataSource.s3Uri", "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$|^file:///.*$")},
		{"channel relative file uri", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, s3 map[string]any) { s3["S3Uri"] = "file://data" })}
		}, "ValidationException", "at 'inputDataConfig.1.member.dataSource.s3DataSource.s3Uri'"},
		{"channel file uri ok", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, s3 map[string]any) { s3["S3Uri"] = "file:///srv/data" })}
		}, "", ""},
		{"channel distribution", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(_, s3 map[string]any) { s3["S3DataDistributionType"] = "Sharded" })}
		}, "ValidationException", prefix1 + at("'Sharded'", "inputDataConfig.1.member.dataSource.s3DataSource.s3DataDistributionType", "Member must satisfy enum value set: [FullyReplicated, ShardedByS3Key]")},
		{"channel compression", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(c, _ map[string]any) { c["CompressionType"] = "gzip" })}
		}, "ValidationException", prefix1 + at("'gzip'", "inputDataConfig.1.member.compressionType", "Member must satisfy enum value set: [None, Gzip]")},
		{"channel input mode", func(r map[string]any) {
			r["InputDataConfig"] = []any{channel(func(c, _ map[string]any) { c["InputMode"] = "Stream" })}
		}, "ValidationException", prefix1 + at("'Stream'", "inputDataConfig.1.member.inputMode", "Member must satisfy enum value set: [Pipe, File, FastFile]")},
		{"21 channels", func(r map[string]any) {
			var cs []any
			for i := 0; i < 21; i++ {
				cs = append(cs, channel(func(c, _ map[string]any) { c["ChannelName"] = fmt.Sprint("c", i) }))
			}
			r["InputDataConfig"] = cs
		}, "ValidationException", "at 'inputDataConfig' failed to satisfy constraint: Member must have length less than or equal to 20"},
		{"tags 51", func(r map[string]any) {
			var tags []any
			for i := 0; i < 51; i++ {
				tags = append(tags, map[string]any{"Key": fmt.Sprint("k", i), "Value": "v"})
			}
			r["Tags"] = tags
		}, "ValidationException", "at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"tag key empty", func(r map[string]any) { r["Tags"] = []any{map[string]any{"Key": "", "Value": "v"}} }, "ValidationException",
			prefix1 + at("null", "tags.1.member.key", "Member must not be null")},
		{"tag value pattern", func(r map[string]any) { r["Tags"] = []any{map[string]any{"Key": "team", "Value": "a;b"}} }, "ValidationException",
			prefix1 + at("'a;b'", "tags.1.member.value", `Member must satisfy regular expression pattern: ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`)},
		{"tags empty list ok", func(r map[string]any) { r["Tags"] = []any{} }, "", ""},
		{"checkpoint uri", func(r map[string]any) { r["CheckpointConfig"] = map[string]any{"S3Uri": "file:///ckpt"} }, "ValidationException",
			prefix1 + at("'file:///ckpt'", "checkpointConfig.s3Uri", "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$")},
		{"retry attempts 31", func(r map[string]any) { r["RetryStrategy"] = map[string]any{"MaximumRetryAttempts": 31} }, "ValidationException",
			prefix1 + at("'31'", "retryStrategy.maximumRetryAttempts", "Member must have value less than or equal to 30")},
		{"no program", func(r map[string]any) {
			r["HyperParameters"] = map[string]any{"epochs": "1"}
		}, "ValidationException", "sagebox needs the training script to run: set the hyperparameter sagemaker_program (the SageMaker SDK's entry_point, e.g. \"train.py\") or SAGEMAKER_PROGRAM in Environment."},
		{"empty JSON program", func(r map[string]any) { r["HyperParameters"] = map[string]any{"sagemaker_program": `""`} }, "ValidationException",
			"sagebox needs the training script to run"},
		{"raw program ok", func(r map[string]any) { r["HyperParameters"] = map[string]any{"sagemaker_program": "train.py"} }, "", ""},
		{"environment program ok", func(r map[string]any) {
			delete(r, "HyperParameters")
			r["Environment"] = map[string]any{"SAGEMAKER_PROGRAM": "train.py"}
		}, "", ""},
		{"several violations", func(r map[string]any) {
			r["TrainingJobName"] = "bad_name"
			delete(r, "RoleArn")
			r["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": 0}
		}, "ValidationException", "3 validation errors detected: " + at("'bad_name'", "trainingJobName", namePattern) + "; " +
			at("null", "roleArn", "Member must not be null") + "; " +
			at("'0'", "stoppingCondition.maxRuntimeInSeconds", "Member must have value greater than or equal to 1")},
	}
	e := newEnv(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validJob(fmt.Sprintf("v-%d", i))
			tt.mutate(req)
			r := e.call(t, "SageMaker.CreateTrainingJob", req)
			if tt.code == "" {
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			code, msg := r.errorOf(t)
			if r.status != 400 || code != tt.code {
				t.Fatalf("got %d %s %q; want 400 %s", r.status, code, msg, tt.code)
			}
			exact := strings.HasPrefix(tt.msg, prefix1) || strings.Contains(tt.msg, "validation errors detected")
			if exact && msg != tt.msg || !exact && !strings.Contains(msg, tt.msg) {
				t.Errorf("message:\n got %q\nwant %q", msg, tt.msg)
			}
		})
	}
}

// TestListAndDescribeValidation covers the other SageMaker operations.
func TestListAndDescribeValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		target string
		body   map[string]any
		msg    string
	}{
		{"SageMaker.ListTrainingJobs", map[string]any{"MaxResults": 0}, prefix1 + at("'0'", "maxResults", "Member must have value greater than or equal to 1")},
		{"SageMaker.ListTrainingJobs", map[string]any{"MaxResults": 101}, prefix1 + at("'101'", "maxResults", "Member must have value less than or equal to 100")},
		{"SageMaker.ListTrainingJobs", map[string]any{"SortBy": "Size"}, prefix1 + at("'Size'", "sortBy", "Member must satisfy enum value set: [Name, CreationTime, Status]")},
		{"SageMaker.ListTrainingJobs", map[string]any{"SortOrder": "Up"}, prefix1 + at("'Up'", "sortOrder", "Member must satisfy enum value set: [Ascending, Descending]")},
		{"SageMaker.ListTrainingJobs", map[string]any{"StatusEquals": "Running"}, prefix1 + at("'Running'", "statusEquals", "Member must satisfy enum value set: [InProgress, Completed, Failed, Stopping, Stopped, Deleting]")},
		{"SageMaker.ListTrainingJobs", map[string]any{"NameContains": "a_b"}, prefix1 + at("'a_b'", "nameContains", `Member must satisfy regular expression pattern: [a-zA-Z0-9\-]+`)},
		{"SageMaker.ListTrainingJobs", map[string]any{"MaxResults": 0, "SortBy": "x"}, "2 validation errors detected: " +
			at("'0'", "maxResults", "Member must have value greater than or equal to 1") + "; " + at("'x'", "sortBy", "Member must satisfy enum value set: [Name, CreationTime, Status]")},
		{"SageMaker.DescribeTrainingJob", map[string]any{}, prefix1 + at("null", "trainingJobName", "Member must not be null")},
		{"SageMaker.DescribeTrainingJob", map[string]any{"TrainingJobName": "a.b"}, prefix1 + at("'a.b'", "trainingJobName", "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")},
		{"SageMaker.StopTrainingJob", map[string]any{}, prefix1 + at("null", "trainingJobName", "Member must not be null")},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.target, tt.body), func(t *testing.T) {
			r := e.call(t, tt.target, tt.body)
			code, msg := r.errorOf(t)
			if r.status != 400 || code != "ValidationException" || msg != tt.msg {
				t.Errorf("got %d %s %q\nwant 400 ValidationException %q", r.status, code, msg, tt.msg)
			}
		})
	}
}
