package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/archive"
)

// trainOptions are the flags of `sagebox train`.
type trainOptions struct {
	endpoint      string
	sourceDir     string
	name          string
	bucket        string
	data          []string
	hyperparams   []string
	envVars       []string
	instanceCount int
	distribution  string
	processesPer  int
	maxRun        int
	metrics       []string
	checkpointS3  string
	noWait        bool
	jsonOut       bool

	frameworkVersion string
	pyVersion        string
}

func newTrainCmd(e *env) *cobra.Command {
	var o trainOptions
	cmd := &cobra.Command{
		Use:   "train ENTRY_POINT",
		Short: "Run a SageMaker training script as a training job",
		Long: `Packages the script's directory as sourcedir.tar.gz, uploads it and the data
directories to the server's S3, creates a training job exactly as the SageMaker
Python SDK would, then streams the job's logs until it ends.

Exit status: 0 when the job completes, 2 when it fails, 3 when it is stopped.`,
		Example: `  sagebox train train.py --data training=./data -p epochs=3 -p lr=0.01
  sagebox train src/train.py --source-dir . --instance-count 2 --distribution torch_distributed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrain(cmd.Context(), e, args[0], &o)
		},
	}
	f := cmd.Flags()
	addEndpointFlag(cmd, &o.endpoint)
	f.StringVar(&o.sourceDir, "source-dir", "", "directory packed as sourcedir.tar.gz (default: the entry point's directory)")
	f.StringVar(&o.name, "name", "", "job name (default: <script>-<timestamp>, like the SageMaker SDK)")
	f.StringVar(&o.bucket, "bucket", "sagebox-default", "bucket for code, data and artifacts")
	f.StringArrayVarP(&o.data, "data", "d", nil, "channel NAME=PATH (a local dir or file, s3://… or file://…); repeatable")
	f.StringArrayVarP(&o.hyperparams, "hyperparameter", "p", nil, "hyperparameter KEY=VALUE (VALUE parsed as JSON when it is valid JSON); repeatable")
	f.StringArrayVarP(&o.envVars, "env", "e", nil, "environment variable KEY=VALUE for the script; repeatable")
	f.IntVar(&o.instanceCount, "instance-count", 1, "number of hosts (algo-1..N)")
	f.StringVar(&o.distribution, "distribution", "none", "how the hosts run the script: torch_distributed (torchrun), mpi (mpirun) or none (once per host)")
	f.StringVar(&o.frameworkVersion, "framework-version", "", "PyTorch version named in the training image (default: the local interpreter's torch, major.minor)")
	f.StringVar(&o.pyVersion, "py-version", "", "Python version named in the training image, e.g. py311 (default: the one AWS's image for that PyTorch has)")
	f.IntVar(&o.processesPer, "processes-per-host", 0, "processes per host for mpi (default 1)")
	f.IntVar(&o.maxRun, "max-run", 86400, "MaxRuntimeInSeconds")
	f.StringArrayVar(&o.metrics, "metric", nil, "metric definition NAME=REGEX; repeatable")
	f.StringVar(&o.checkpointS3, "checkpoint-s3-uri", "", "CheckpointConfig.S3Uri")
	f.BoolVar(&o.noWait, "no-wait", false, "submit and exit without following the job")
	f.BoolVar(&o.jsonOut, "json", false, "print the final DescribeTrainingJob as JSON")
	return cmd
}

var jobNameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// defaultJobName mirrors the SDK's name_from_base: <base>-YYYY-MM-DD-HH-MM-SS-mmm.
func defaultJobName(entry string, now time.Time) string {
	base := strings.TrimSuffix(filepath.Base(entry), filepath.Ext(entry))
	base = strings.Trim(jobNameUnsafe.ReplaceAllString(base, "-"), "-")
	if base == "" {
		base = "sagebox"
	}
	ts := now.UTC().Format("2006-01-02-15-04-05.000")
	ts = strings.Replace(ts, ".", "-", 1)
	if max := 63 - len(ts) - 1; len(base) > max {
		base = strings.Trim(base[:max], "-")
	}
	return base + "-" + ts
}

// encodeHyperparameter JSON-encodes a value the way the SageMaker SDK does:
// a value that already parses as JSON keeps its type, anything else is a string.
func encodeHyperparameter(v string) string {
	var x any
	if err := json.Unmarshal([]byte(v), &x); err == nil {
		b, _ := json.Marshal(x)
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func splitKV(s, what string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%s %q: want KEY=VALUE", what, s)
	}
	return k, v, nil
}

func runTrain(ctx context.Context, e *env, entry string, o *trainOptions) error {
	c, err := newClients(e, o.endpoint)
	if err != nil {
		return err
	}
	sourceDir := o.sourceDir
	if sourceDir == "" {
		sourceDir = filepath.Dir(entry)
	}
	sourceDir, err = filepath.Abs(sourceDir)
	if err != nil {
		return err
	}
	absEntry, err := filepath.Abs(entry)
	if err != nil {
		return err
	}
	program, err := filepath.Rel(sourceDir, absEntry)
	if err != nil || strings.HasPrefix(program, "..") {
		return fmt.Errorf("entry point %s is not inside the source dir %s", entry, sourceDir)
	}
	if _, err := os.Stat(absEntry); err != nil {
		return fmt.Errorf("entry point: %w", err)
	}
	name := o.name
	if name == "" {
		name = defaultJobName(entry, time.Now())
	}
	region := "us-east-1"
	if r := e.getenv("AWS_REGION"); r != "" {
		region = r
	}
	if o.instanceCount < 1 {
		return fmt.Errorf("--instance-count %d: want 1 or more", o.instanceCount)
	}
	image, err := resolveTrainingImage(ctx, e, region, o.frameworkVersion, o.pyVersion)
	if err != nil {
		return err
	}

	if err := ensureBucket(ctx, c, o.bucket); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Uploading source %s to s3://%s/%s/source/sourcedir.tar.gz\n", sourceDir, o.bucket, name)
	codeURI, err := uploadSourceDir(ctx, c, sourceDir, o.bucket, name+"/source/sourcedir.tar.gz")
	if err != nil {
		return err
	}

	hp := map[string]string{
		"sagemaker_program":             encodeHyperparameter(program),
		"sagemaker_submit_directory":    encodeHyperparameter(codeURI),
		"sagemaker_container_log_level": "20",
		"sagemaker_job_name":            encodeHyperparameter(name),
		"sagemaker_region":              encodeHyperparameter(region),
	}
	for _, p := range o.hyperparams {
		k, v, err := splitKV(p, "hyperparameter")
		if err != nil {
			return err
		}
		hp[k] = encodeHyperparameter(v)
	}
	switch o.distribution {
	case "", "none":
	case "torch_distributed":
		hp["sagemaker_torch_distributed_enabled"] = "true"
	case "mpi":
		hp["sagemaker_mpi_enabled"] = "true"
		n := o.processesPer
		if n == 0 {
			n = 1
		}
		hp["sagemaker_mpi_num_of_processes_per_host"] = strconv.Itoa(n)
	default:
		return fmt.Errorf("--distribution %q: want torch_distributed, mpi or none", o.distribution)
	}

	var channels []smtypes.Channel
	for _, d := range o.data {
		ch, path, err := splitKV(d, "data")
		if err != nil {
			return err
		}
		uri, err := uploadChannel(ctx, e, c, o.bucket, name, ch, path)
		if err != nil {
			return err
		}
		channels = append(channels, smtypes.Channel{
			ChannelName: aws.String(ch),
			DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
				S3DataType:             smtypes.S3DataTypeS3Prefix,
				S3Uri:                  aws.String(uri),
				S3DataDistributionType: smtypes.S3DataDistributionFullyReplicated,
			}},
		})
	}
	envMap := map[string]string{}
	for _, kv := range o.envVars {
		k, v, err := splitKV(kv, "env")
		if err != nil {
			return err
		}
		envMap[k] = v
	}
	var metricDefs []smtypes.MetricDefinition
	for _, m := range o.metrics {
		k, v, err := splitKV(m, "metric")
		if err != nil {
			return err
		}
		metricDefs = append(metricDefs, smtypes.MetricDefinition{Name: aws.String(k), Regex: aws.String(v)})
	}
	in := &sagemaker.CreateTrainingJobInput{
		TrainingJobName: aws.String(name),
		RoleArn:         aws.String("arn:aws:iam::123456789012:role/sagebox"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{
			TrainingImage:     aws.String(image),
			TrainingInputMode: smtypes.TrainingInputModeFile,
			MetricDefinitions: metricDefs,
		},
		HyperParameters:   hp,
		InputDataConfig:   channels,
		OutputDataConfig:  &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://" + o.bucket + "/")},
		ResourceConfig:    &smtypes.ResourceConfig{InstanceCount: aws.Int32(int32(o.instanceCount)), InstanceType: smtypes.TrainingInstanceTypeMlM5Xlarge, VolumeSizeInGB: aws.Int32(30)},
		StoppingCondition: &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(int32(o.maxRun))},
	}
	if len(envMap) > 0 {
		in.Environment = envMap
	}
	if o.checkpointS3 != "" {
		in.CheckpointConfig = &smtypes.CheckpointConfig{S3Uri: aws.String(o.checkpointS3)}
	}
	if _, err := c.sm.CreateTrainingJob(ctx, in); err != nil {
		return c.explain(ctx, fmt.Errorf("create training job: %w", err))
	}
	fmt.Fprintf(e.stderr, "Created training job %s\n", name)
	if o.noWait {
		fmt.Fprintln(e.stdout, name)
		return nil
	}
	return followJob(ctx, e, c, name, followOptions{logs: true, jsonOut: o.jsonOut, wait: true})
}

func ensureBucket(ctx context.Context, c *clients, bucket string) error {
	_, err := c.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return c.explain(ctx, fmt.Errorf("create bucket %s: %w", bucket, err))
	}
	return nil
}

// uploadSourceDir packs dir and uploads it to s3://bucket/key.
func uploadSourceDir(ctx context.Context, c *clients, dir, bucket, key string) (string, error) {
	tmp, err := os.CreateTemp("", "sourcedir-*.tar.gz")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := archive.WriteTarGz(ctx, tmp, dir); err != nil {
		return "", fmt.Errorf("pack %s: %w", dir, err)
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return "", err
	}
	if _, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: tmp}); err != nil {
		return "", c.explain(ctx, fmt.Errorf("upload sourcedir.tar.gz: %w", err))
	}
	return "s3://" + bucket + "/" + key, nil
}

// uploadChannel returns the channel's S3 URI, uploading a local path first.
func uploadChannel(ctx context.Context, e *env, c *clients, bucket, job, channel, path string) (string, error) {
	if strings.HasPrefix(path, "s3://") || strings.HasPrefix(path, "file://") {
		return path, nil
	}
	root, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("channel %s: %w", channel, err)
	}
	prefix := job + "/input/" + channel + "/"
	var files []string
	if st.IsDir() {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("channel %s: %w", channel, err)
		}
	} else {
		files = []string{root}
		root = filepath.Dir(root)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("channel %s: %s has no files", channel, path)
	}
	sort.Strings(files)
	fmt.Fprintf(e.stderr, "Uploading %d file(s) from %s to s3://%s/%s\n", len(files), path, bucket, prefix)
	work := make(chan string)
	errs := make(chan error, len(files))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				errs <- putFile(ctx, c, bucket, prefix, root, p)
			}
		}()
	}
	for _, p := range files {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return "", c.explain(ctx, err)
		}
	}
	return "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/"), nil
}

func putFile(ctx context.Context, c *clients, bucket, prefix, root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	key := prefix + filepath.ToSlash(rel)
	if _, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f}); err != nil {
		return fmt.Errorf("upload %s: %w", p, err)
	}
	return nil
}
