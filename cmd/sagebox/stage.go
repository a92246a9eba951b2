package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/staging/s3obj"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training"
)

// stageFlags are what `sagebox stage` and `sagebox collect` share: where
// the S3 endpoint is and which job they work for.
type stageFlags struct {
	endpoint string
	jobFile  string
	jobName  string
	region   string
}

const jobHelp = `The job comes from --job FILE (a JSON document in DescribeTrainingJob's
shape, such as "aws sagemaker describe-training-job" prints or a
CreateTrainingJob request; timestamps are ignored) or from --job-name NAME,
which calls DescribeTrainingJob at the same endpoint. Credentials come from
AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (sagebox's dummy ones when unset);
the S3 client uses path-style addressing. Only the endpoint is reached: no
sagebox data directory is needed.`

func (f *stageFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.endpoint, "endpoint-url", "", "S3 (and SageMaker) endpoint URL (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, $SAGEBOX_ENDPOINT or "+defaultEndpoint+")")
	cmd.Flags().StringVar(&f.jobFile, "job", "", "JSON file describing the training job")
	cmd.Flags().StringVar(&f.jobName, "job-name", "", "training job to describe with DescribeTrainingJob")
	cmd.Flags().StringVar(&f.region, "region", "", "region written to the job's environment (default $AWS_REGION)")
	cmd.MarkFlagsOneRequired("job", "job-name")
	cmd.MarkFlagsMutuallyExclusive("job", "job-name")
}

// open resolves the endpoint, builds the clients and loads the job.
func (f *stageFlags) open(ctx context.Context, e *env) (*staging.Stager, *sagebox.TrainingJob, string, error) {
	endpoint := f.endpoint
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if endpoint == "" {
			endpoint = e.getenv(k)
		}
	}
	c, err := newClients(e, endpoint)
	if err != nil {
		return nil, nil, "", err
	}
	region := f.region
	if region == "" {
		region = e.getenv("AWS_REGION")
	}
	var job *sagebox.TrainingJob
	if f.jobFile != "" {
		job, err = readJobFile(f.jobFile)
	} else {
		job, err = describeJob(ctx, c, f.jobName)
	}
	if err != nil {
		return nil, nil, "", err
	}
	st := &staging.Stager{
		Objects: s3obj.New(c.s3),
		Notes: func(ctx context.Context, hosts []int, msg string) {
			for _, l := range strings.Split(msg, "\n") {
				fmt.Fprintln(e.stderr, "sagebox:", l)
			}
		},
		Log: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	return st, job, region, nil
}

func newStageCmd(e *env) *cobra.Command {
	var (
		f    stageFlags
		host string
		root string
	)
	cmd := &cobra.Command{
		Use:   "stage (--job FILE | --job-name NAME) --host algo-N [--root /opt/ml]",
		Short: "Stage one job host's /opt/ml from an S3 endpoint (a pod's init container)",
		Long: `Stage one host of a training job into an /opt/ml-shaped tree, as the
sagebox server does for its local hosts: the directories and
input/config/{hyperparameters,inputdataconfig,resourceconfig}.json, every
input channel (that host's share of a ShardedByS3Key channel) into
input/data/<channel>/, the source directory (sourcedir.tar.gz, extracted
safely) into code/, and the checkpoints under CheckpointConfig.S3Uri into
its LocalPath. Files are downloaded: there is no object store on this
machine to hard-link from. Existing files in the tree are kept.

` + jobHelp + `

A problem with the job's inputs prints its FailureReason ("ClientError:
...") and exits 2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, job, region, err := f.open(ctx, e)
			if err != nil {
				return err
			}
			return jobFailure(stageHost(ctx, st, job, region, host, root))
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&host, "host", "algo-1", "the host to stage (algo-1..N)")
	cmd.Flags().StringVar(&root, "root", "/opt/ml", "the host's /opt/ml tree")
	return cmd
}

func stageHost(ctx context.Context, st *staging.Stager, job *sagebox.TrainingJob, region, host, root string) error {
	in, err := training.JobInputs(job, region)
	if err != nil {
		return err
	}
	index := -1
	for i, h := range in.Hosts {
		if h == host {
			index = i
		}
	}
	if index < 0 {
		return fmt.Errorf("host %q is not one of the job's hosts %v", host, in.Hosts)
	}
	if err := toolkit.PrepareHostTree(job, region, host, root); err != nil {
		return err
	}
	h := []staging.Host{{Index: index, Name: host, Tree: staging.Tree{Root: root}}}
	for _, c := range in.Channels {
		if err := st.StageChannel(ctx, c, len(in.Hosts), h); err != nil {
			return err
		}
	}
	if err := st.StageSourceDir(ctx, in.SourceDir, in.EntryPoint, h[0].Tree); err != nil {
		return err
	}
	ck, err := st.Checkpoints(ctx, in.Checkpoint, h)
	if err != nil {
		return err
	}
	return ck.Download(ctx)
}

func newCollectCmd(e *env) *cobra.Command {
	var (
		f     stageFlags
		roots []string
		every time.Duration
	)
	cmd := &cobra.Command{
		Use:   "collect (--job FILE | --job-name NAME) [--root /opt/ml]...",
		Short: "Upload a job's model.tar.gz, output.tar.gz and checkpoints to an S3 endpoint (a pod's sidecar)",
		Long: `Collect a training job's artifacts as the sagebox server does when its
processes end: model/ packed into <S3OutputPath>/<job>/output/model.tar.gz
(one object per file under output/model/ with CompressionType NONE) and
output/data/ into output.tar.gz, after uploading every file of the
checkpoint LocalPath to CheckpointConfig.S3Uri. Give --root once per host
tree to merge several (a later tree's file wins, as on SageMaker); the
default is /opt/ml. Prints the S3ModelArtifacts URI.

With --checkpoints-every D it first runs as a sidecar: it uploads changed
checkpoint files every D until it receives SIGTERM or SIGINT (the training
container has ended), then collects as above.

` + jobHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, job, region, err := f.open(ctx, e)
			if err != nil {
				return err
			}
			uri, err := collect(ctx, st, job, region, roots, every)
			if err != nil {
				return jobFailure(err)
			}
			if uri != "" {
				fmt.Fprintln(e.stdout, uri)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringArrayVar(&roots, "root", []string{"/opt/ml"}, "a host's /opt/ml tree (repeat for several hosts, in host order)")
	cmd.Flags().DurationVar(&every, "checkpoints-every", 0, "sync checkpoints at this interval until SIGTERM, then collect")
	return cmd
}

func collect(ctx context.Context, st *staging.Stager, job *sagebox.TrainingJob, region string, roots []string, every time.Duration) (string, error) {
	in, err := training.JobInputs(job, region)
	if err != nil {
		return "", err
	}
	var hosts []staging.Host
	var trees []staging.Tree
	for i, r := range roots {
		t := staging.Tree{Root: r}
		hosts = append(hosts, staging.Host{Index: i, Name: r, Tree: t})
		trees = append(trees, t)
	}
	ck, err := st.Checkpoints(ctx, in.Checkpoint, hosts)
	if err != nil {
		return "", err
	}
	if every > 0 {
		syncUntilDone(ctx, st, ck, every)
		// The signal that ended the loop must not cancel the final upload.
		ctx = context.WithoutCancel(ctx)
	}
	if err := ck.Sync(ctx); err != nil {
		return "", fmt.Errorf("checkpoint sync: %w", err)
	}
	return st.UploadArtifacts(ctx, in.Output, trees)
}

// syncUntilDone uploads changed checkpoints every interval until ctx ends.
// A failed pass is logged and retried at the next tick.
func syncUntilDone(ctx context.Context, st *staging.Stager, ck *staging.Checkpoints, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := ck.Sync(ctx); err != nil && ctx.Err() == nil {
				st.Log.Warn("checkpoint sync failed", "err", err)
			}
		}
	}
}

// jobFailure exits 2 with the FailureReason for a problem with the job's
// inputs; other errors are returned as they are.
func jobFailure(err error) error {
	if err == nil {
		return nil
	}
	if reason, ok := training.FailureReason(err); ok {
		return exitError{code: 2, msg: reason}
	}
	return err
}

// readJobFile reads a job description, ignoring the timestamps (the AWS
// CLI prints them as ISO strings, sagebox's own JSON as epoch seconds).
func readJobFile(path string) (*sagebox.TrainingJob, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("read job %s: %w", path, err)
	}
	for _, k := range []string{"CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime", "SecondaryStatusTransitions"} {
		delete(fields, k)
	}
	b, err = json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", path, err)
	}
	var job sagebox.TrainingJob
	if err := json.Unmarshal(b, &job); err != nil {
		return nil, fmt.Errorf("read job %s: %w", path, err)
	}
	if job.TrainingJobName == "" {
		return nil, fmt.Errorf("read job %s: no TrainingJobName", path)
	}
	return &job, nil
}

// describeJob fetches the job with DescribeTrainingJob and keeps what
// staging and collecting read.
func describeJob(ctx context.Context, c *clients, name string) (*sagebox.TrainingJob, error) {
	d, err := c.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
	if err != nil {
		return nil, c.explain(ctx, fmt.Errorf("describe training job %s: %w", name, err))
	}
	job := &sagebox.TrainingJob{
		TrainingJobName: aws.ToString(d.TrainingJobName),
		TrainingJobArn:  aws.ToString(d.TrainingJobArn),
		HyperParameters: d.HyperParameters,
		Environment:     d.Environment,
	}
	if a := d.AlgorithmSpecification; a != nil {
		job.AlgorithmSpecification = &sagebox.AlgorithmSpecification{TrainingImage: aws.ToString(a.TrainingImage), TrainingInputMode: string(a.TrainingInputMode)}
	}
	if r := d.ResourceConfig; r != nil {
		job.ResourceConfig = &sagebox.ResourceConfig{InstanceType: string(r.InstanceType), InstanceCount: int(aws.ToInt32(r.InstanceCount))}
		if len(r.InstanceGroups) > 0 {
			job.ResourceConfig.InstanceGroups = sagebox.RawJSON(`[{}]`) // refused as the runner refuses it
		}
	}
	if o := d.OutputDataConfig; o != nil {
		job.OutputDataConfig = &sagebox.OutputDataConfig{S3OutputPath: aws.ToString(o.S3OutputPath), CompressionType: string(o.CompressionType)}
	}
	if ck := d.CheckpointConfig; ck != nil {
		job.CheckpointConfig = &sagebox.CheckpointConfig{S3Uri: aws.ToString(ck.S3Uri), LocalPath: aws.ToString(ck.LocalPath)}
	}
	for _, ch := range d.InputDataConfig {
		c := sagebox.Channel{
			ChannelName: aws.ToString(ch.ChannelName), ContentType: aws.ToString(ch.ContentType),
			CompressionType: string(ch.CompressionType), RecordWrapperType: string(ch.RecordWrapperType), InputMode: string(ch.InputMode),
		}
		if ds := ch.DataSource; ds != nil && ds.S3DataSource != nil {
			s := ds.S3DataSource
			c.DataSource = &sagebox.DataSource{S3DataSource: &sagebox.S3DataSource{
				S3DataType: string(s.S3DataType), S3Uri: aws.ToString(s.S3Uri), S3DataDistributionType: string(s.S3DataDistributionType),
			}}
		}
		job.InputDataConfig = append(job.InputDataConfig, c)
	}
	return job, nil
}
