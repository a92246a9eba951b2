package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/archive"
)

// deployOptions are the flags of `sagebox deploy`.
type deployOptions struct {
	endpoint      string
	job           string
	entryPoint    string
	sourceDir     string
	name          string
	bucket        string
	instanceCount int
	instanceType  string
	envVars       []string
	noWait        bool
	timeout       time.Duration
}

func newDeployCmd(e *env) *cobra.Command {
	var o deployOptions
	cmd := &cobra.Command{
		Use:   "deploy [MODEL_DIR | model.tar.gz]",
		Short: "Deploy a model (a local directory or model.tar.gz, or a finished training job) as an endpoint",
		Long: `Creates a model, an endpoint config and an endpoint, the way the SageMaker SDK's
PyTorchModel(...).deploy() does, and waits until the endpoint is InService.

The model is a local directory or model.tar.gz, or the artifacts of a finished
training job (--job). With --entry-point (and optionally --source-dir) the code
is packed into code/ of the model archive, as PyTorchModel's repack does;
without it, the model must bring its own code/inference.py or be served by the
default handlers (TorchScript model.pt).

Exit status: 0 when the endpoint is InService, 2 when it failed.`,
		Example: `  sagebox deploy ./model --entry-point inference.py
  sagebox deploy --job digits-2026-12-03-10-00-00-000 --entry-point examples/digits/inference.py
  sagebox deploy model.tar.gz --name my-endpoint --instance-count 2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model := ""
			if len(args) == 1 {
				model = args[0]
			}
			return runDeploy(cmd.Context(), e, model, &o)
		},
	}
	f := cmd.Flags()
	addEndpointFlag(cmd, &o.endpoint)
	f.StringVar(&o.job, "job", "", "deploy the model of this finished training job")
	f.StringVar(&o.entryPoint, "entry-point", "", "inference script (model_fn, input_fn, predict_fn, output_fn), packed into code/")
	f.StringVar(&o.sourceDir, "source-dir", "", "directory packed into code/ with the entry point (default: only the entry point)")
	f.StringVar(&o.name, "name", "", "name of the model, config and endpoint (default: <model>-<timestamp>)")
	f.StringVar(&o.bucket, "bucket", "sagebox-default", "bucket the packed model is uploaded to")
	f.IntVar(&o.instanceCount, "instance-count", 1, "instances (model servers) behind the endpoint")
	f.StringVar(&o.instanceType, "instance-type", "ml.m5.large", "InstanceType recorded in the endpoint config")
	f.StringArrayVarP(&o.envVars, "env", "e", nil, "environment variable KEY=VALUE for the model server; repeatable")
	f.BoolVar(&o.noWait, "no-wait", false, "create the endpoint and exit without waiting for InService")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "how long to wait for InService")
	return cmd
}

func runDeploy(ctx context.Context, e *env, model string, o *deployOptions) error {
	if (model == "") == (o.job == "") {
		return errors.New("give either a model (directory or model.tar.gz) or --job, not both")
	}
	if o.sourceDir != "" && o.entryPoint == "" {
		return errors.New("--source-dir needs --entry-point (the script in it to serve with)")
	}
	if o.instanceCount < 1 {
		return errors.New("--instance-count must be at least 1")
	}
	env := map[string]string{}
	for _, kv := range o.envVars {
		k, v, err := splitKV(kv, "--env")
		if err != nil {
			return err
		}
		env[k] = v
	}
	c, err := newClients(e, o.endpoint)
	if err != nil {
		return err
	}
	base := o.job
	if model != "" {
		base = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(filepath.Clean(model)), ".gz"), ".tar")
	}
	name := o.name
	if name == "" {
		name = defaultJobName(base, time.Now())
	}

	var dataURL string
	switch {
	case o.job != "" && o.entryPoint == "":
		d, err := c.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(o.job)})
		if err != nil {
			return c.explain(ctx, fmt.Errorf("describe training job %s: %w", o.job, err))
		}
		if d.ModelArtifacts == nil || aws.ToString(d.ModelArtifacts.S3ModelArtifacts) == "" {
			return fmt.Errorf("training job %s has no model artifacts (it is %s)", o.job, d.TrainingJobStatus)
		}
		dataURL = aws.ToString(d.ModelArtifacts.S3ModelArtifacts)
	default:
		dir, cleanup, err := stageModel(ctx, c, model, o)
		if err != nil {
			return err
		}
		defer cleanup()
		if err := ensureBucket(ctx, c, o.bucket); err != nil {
			return err
		}
		if dataURL, err = uploadModel(ctx, c, dir, o.bucket, name+"/model.tar.gz"); err != nil {
			return err
		}
	}
	if o.entryPoint != "" {
		program := filepath.Base(o.entryPoint)
		if o.sourceDir != "" {
			if rel, err := filepath.Rel(o.sourceDir, o.entryPoint); err == nil && !strings.HasPrefix(rel, "..") {
				program = filepath.ToSlash(rel)
			}
		}
		env["SAGEMAKER_PROGRAM"] = program
		env["SAGEMAKER_SUBMIT_DIRECTORY"] = "/opt/ml/model/code"
	}
	region := c.sm.Options().Region
	if _, err := c.sm.CreateModel(ctx, &sagemaker.CreateModelInput{
		ModelName: aws.String(name),
		PrimaryContainer: &smtypes.ContainerDefinition{
			Image:        aws.String(fmt.Sprintf("763104351884.dkr.ecr.%s.amazonaws.com/pytorch-inference:1.13-cpu-py39", region)),
			ModelDataUrl: aws.String(dataURL),
			Environment:  env,
		},
	}); err != nil {
		return c.explain(ctx, fmt.Errorf("create model %s: %w", name, err))
	}
	if _, err := c.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{
		EndpointConfigName: aws.String(name),
		ProductionVariants: []smtypes.ProductionVariant{{
			VariantName:          aws.String("AllTraffic"),
			ModelName:            aws.String(name),
			InitialInstanceCount: aws.Int32(int32(o.instanceCount)),
			InstanceType:         smtypes.ProductionVariantInstanceType(o.instanceType),
			InitialVariantWeight: aws.Float32(1),
		}},
	}); err != nil {
		return c.explain(ctx, fmt.Errorf("create endpoint config %s: %w", name, err))
	}
	start := time.Now()
	if _, err := c.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{
		EndpointName: aws.String(name), EndpointConfigName: aws.String(name), Tags: []smtypes.Tag{},
	}); err != nil {
		return c.explain(ctx, fmt.Errorf("create endpoint %s: %w", name, err))
	}
	fmt.Fprintf(e.stderr, "Creating endpoint %s (model %s)\n", name, dataURL)
	if o.noWait {
		fmt.Fprintln(e.stdout, name)
		return nil
	}
	if err := waitInService(ctx, e, c, name, o.timeout); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Endpoint %s is InService after %s. Invoke it with:\n"+
		"  sagebox invoke %s --content-type application/json --body input.json\n"+
		"  boto3.client(\"sagemaker-runtime\", endpoint_url=%q).invoke_endpoint(EndpointName=%q, ContentType=\"application/json\", Body=...)\n",
		name, time.Since(start).Round(10*time.Millisecond), name, c.endpoint, name)
	fmt.Fprintln(e.stdout, name)
	return nil
}

// waitInService polls DescribeEndpoint until the endpoint leaves Creating
// and Updating: nil for InService, an exitError (status 2) otherwise.
func waitInService(ctx context.Context, e *env, c *clients, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status := newStatusLine(e.stderr)
	defer status.clear()
	for {
		d, err := c.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("endpoint %s is not InService after %s", name, timeout)
			}
			return c.explain(ctx, fmt.Errorf("describe endpoint %s: %w", name, err))
		}
		switch d.EndpointStatus {
		case smtypes.EndpointStatusCreating, smtypes.EndpointStatusUpdating:
			status.draw(fmt.Sprintf("%s: %s", name, d.EndpointStatus))
		case smtypes.EndpointStatusInService:
			if r := aws.ToString(d.FailureReason); r != "" {
				status.clear()
				return exitError{code: 2, msg: fmt.Sprintf("endpoint %s stayed on its previous deployment: %s", name, r)}
			}
			return nil
		default:
			status.clear()
			return exitError{code: 2, msg: fmt.Sprintf("endpoint %s is %s: %s", name, d.EndpointStatus, aws.ToString(d.FailureReason))}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("endpoint %s is not InService after %s", name, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stageModel lays the model out in a temporary directory as it will be
// served: the model's files at the top, the code under code/.
func stageModel(ctx context.Context, c *clients, model string, o *deployOptions) (string, func(), error) {
	dir, err := os.MkdirTemp("", "sagebox-deploy-*")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	fail := func(err error) (string, func(), error) { cleanup(); return "", nil, err }
	switch {
	case o.job != "":
		d, err := c.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(o.job)})
		if err != nil {
			return fail(c.explain(ctx, fmt.Errorf("describe training job %s: %w", o.job, err)))
		}
		if d.ModelArtifacts == nil || aws.ToString(d.ModelArtifacts.S3ModelArtifacts) == "" {
			return fail(fmt.Errorf("training job %s has no model artifacts (it is %s)", o.job, d.TrainingJobStatus))
		}
		bucket, key, ok := strings.Cut(strings.TrimPrefix(aws.ToString(d.ModelArtifacts.S3ModelArtifacts), "s3://"), "/")
		if !ok {
			return fail(fmt.Errorf("training job %s: model artifacts %q are not an S3 URI", o.job, aws.ToString(d.ModelArtifacts.S3ModelArtifacts)))
		}
		obj, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return fail(c.explain(ctx, fmt.Errorf("download the model of %s: %w", o.job, err)))
		}
		err = archive.Extract(ctx, obj.Body, dir)
		obj.Body.Close()
		if err != nil {
			return fail(fmt.Errorf("unpack the model of %s: %w", o.job, err))
		}
	default:
		st, err := os.Stat(model)
		if err != nil {
			return fail(err)
		}
		if st.IsDir() {
			err = copyTree(model, dir)
		} else {
			err = archive.ExtractFile(ctx, model, dir)
		}
		if err != nil {
			return fail(fmt.Errorf("read model %s: %w", model, err))
		}
	}
	if o.entryPoint != "" {
		code := filepath.Join(dir, "code")
		if err := os.MkdirAll(code, 0o755); err != nil {
			return fail(err)
		}
		if o.sourceDir != "" {
			err = copyTree(o.sourceDir, code)
		} else {
			err = copyFile(o.entryPoint, filepath.Join(code, filepath.Base(o.entryPoint)))
		}
		if err != nil {
			return fail(fmt.Errorf("pack the code: %w", err))
		}
	}
	return dir, cleanup, nil
}

func uploadModel(ctx context.Context, c *clients, dir, bucket, key string) (string, error) {
	tmp, err := os.CreateTemp("", "model-*.tar.gz")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := archive.WriteTarGz(ctx, tmp, dir); err != nil {
		return "", fmt.Errorf("pack the model: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: tmp}); err != nil {
		return "", c.explain(ctx, fmt.Errorf("upload model.tar.gz: %w", err))
	}
	return "s3://" + bucket + "/" + key, nil
}

// copyTree copies the regular files and directories under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil // links and devices are not part of a model
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
