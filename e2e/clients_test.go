package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// sdkFlow does on the wire what the SageMaker Python SDK's PyTorch estimator
// does for fit(logs=True): upload sourcedir.tar.gz and data, CreateTrainingJob
// with JSON-encoded hyperparameters and the debugger/profiler members, then
// logs_for_job's DescribeLogStreams/GetLogEvents loop and the final Describe.
const sdkFlow = `
import io, json, os, sys, tarfile, time
import boto3
url = os.environ["SAGEBOX_URL"]
sm = boto3.client("sagemaker", endpoint_url=url)
s3 = boto3.client("s3", endpoint_url=url)
logs = boto3.client("logs", endpoint_url=url)
# The SDK names its default bucket after the caller's account (STS).
account = boto3.client("sts", endpoint_url=url).get_caller_identity()["Account"]
bucket = "sagemaker-us-east-1-" + account
try:
    s3.head_bucket(Bucket=bucket)
except s3.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "404" and e.response["Error"]["Message"] == "Not Found", e.response
    s3.create_bucket(Bucket=bucket)
job = "pytorch-training-2026-12-02-10-08-01-128"
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    src = b'''
import argparse, json, os, torch
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int); p.add_argument("--opt"); p.add_argument("--layers"); p.add_argument("--note")
a = p.parse_args()
print("args", json.dumps(vars(a)), flush=True)
print("hps", os.environ["SM_HPS"], flush=True)
data = open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "rows.csv")).read().split()
x = torch.tensor([[float(v) for v in r.split(",")] for r in data])
m = torch.nn.Linear(2, 1)
for _ in range(a.epochs):
    loss = m(x).pow(2).mean(); loss.backward()
print("loss=%.4f" % loss.item(), flush=True)
torch.save(m.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pth"))
'''
    info = tarfile.TarInfo("train.py"); info.size = len(src)
    tar.addfile(info, io.BytesIO(src))
s3.put_object(Bucket=bucket, Key=job + "/source/sourcedir.tar.gz", Body=buf.getvalue(), ServerSideEncryption="aws:kms")
s3.put_object(Bucket=bucket, Key="data/rows.csv", Body=b"1,2\n3,4\n")
hps = {"epochs": 3, "opt": "adam", "layers": [64, 32], "note": "two words",
       "sagemaker_program": "train.py",
       "sagemaker_submit_directory": "s3://%s/%s/source/sourcedir.tar.gz" % (bucket, job),
       "sagemaker_container_log_level": 20, "sagemaker_job_name": job, "sagemaker_region": "us-east-1"}
sm.create_training_job(
    TrainingJobName=job,
    AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311",
                            "TrainingInputMode": "File", "EnableSageMakerMetricsTimeSeries": True,
                            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}]},
    RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
    OutputDataConfig={"S3OutputPath": "s3://%s/" % bucket},
    ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    StoppingCondition={"MaxRuntimeInSeconds": 86400},
    HyperParameters={k: json.dumps(v) for k, v in hps.items()},
    InputDataConfig=[{"ChannelName": "training", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://%s/data" % bucket, "S3DataDistributionType": "FullyReplicated"}}}],
    DebugHookConfig={"S3OutputPath": "s3://%s/" % bucket, "CollectionConfigurations": []},
    ProfilerConfig={"DisableProfiler": False},
    Environment={"MY_SETTING": "on"},
)
# logs_for_job, as the SDK does it (without its sleeps).
desc = sm.describe_training_job(TrainingJobName=job)
streams, positions, lines = [], {}, []
for _ in range(600):
    desc = sm.describe_training_job(TrainingJobName=job)
    status = desc["TrainingJobStatus"]
    for t in desc["SecondaryStatusTransitions"]:
        assert "StatusMessage" in t and desc["LastModifiedTime"]
    try:
        resp = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=job + "/",
                                         orderBy="LogStreamName", limit=1)
        assert "nextToken" not in resp, resp
        streams = [s["logStreamName"] for s in resp["logStreams"]]
    except logs.exceptions.ResourceNotFoundException:
        pass
    for s in streams:
        start = positions.get(s, 0)
        while True:
            r = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=s,
                                    startTime=start, startFromHead=True)
            new = [e for e in r["events"] if (e["timestamp"], e["message"]) not in set(lines)]
            if not new:
                break
            for e in new:
                lines.append((e["timestamp"], e["message"]))
                start = e["timestamp"]
            positions[s] = start
    if status in ("Completed", "Failed", "Stopped"):
        break
    time.sleep(0.1)
print("STATUS", status, desc.get("FailureReason", ""))
print("STREAMS", streams)
print("ARTIFACTS", desc["ModelArtifacts"]["S3ModelArtifacts"])
print("BILLABLE", desc["BillableTimeInSeconds"], "TRAINING", desc["TrainingTimeInSeconds"])
print("METRICS", desc.get("FinalMetricDataList"))
print("ECHO", json.dumps({"debug": desc.get("DebugHookConfig"), "profiler": desc.get("ProfilerConfig")}))
for _, m in lines:
    print("LOG", m)
s3.head_object(Bucket=bucket, Key=job + "/output/model.tar.gz")
print("LIST", [j["TrainingJobName"] for j in sm.list_training_jobs(StatusEquals="Completed")["TrainingJobSummaries"]])
`

func TestBoto3SDKFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := s.python(ctx, sdkFlow)
	if err != nil {
		t.Fatalf("boto3 flow: %v\n%s", err, out)
	}
	mustContain(t, "boto3 output", out,
		"STATUS Completed",
		"STREAMS ['pytorch-training-2026-12-02-10-08-01-128/algo-1-",
		"ARTIFACTS s3://sagemaker-us-east-1-123456789012/pytorch-training-2026-12-02-10-08-01-128/output/model.tar.gz",
		`LOG args {"epochs": 3, "opt": "adam", "layers": "[64, 32]", "note": "two words"}`,
		`LOG hps {"epochs":3,"layers":[64,32],"note":"two words","opt":"adam"}`,
		"'MetricName': 'train:loss'",
		`"profiler": {"DisableProfiler": false}`,
		"LIST ['pytorch-training-2026-12-02-10-08-01-128']",
	)
}

// The AWS CLI reads jobs, logs and artifacts like it would from AWS.
func TestAWSCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/aws")
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), "import os\nprint('hello from', os.environ['SM_CURRENT_HOST'])\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'w.txt'), 'w').write('ok')\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "cli-job"); code != 0 {
		t.Fatalf("train: %d\n%s\n%s", code, out, errOut)
	}
	out, err := s.awscli(ctx, "sagemaker", "describe-training-job", "--training-job-name", "cli-job")
	if err != nil {
		t.Fatalf("describe-training-job: %v\n%s", err, out)
	}
	mustContain(t, "describe-training-job", out, `"TrainingJobStatus": "Completed"`, `"S3ModelArtifacts": "s3://sagebox-default/cli-job/output/model.tar.gz"`)
	out, err = s.awscli(ctx, "sagemaker", "list-training-jobs", "--name-contains", "cli")
	if err != nil || !strings.Contains(out, `"TrainingJobName": "cli-job"`) {
		t.Fatalf("list-training-jobs: %v\n%s", err, out)
	}
	out, err = s.awscli(ctx, "logs", "filter-log-events", "--log-group-name", "/aws/sagemaker/TrainingJobs", "--log-stream-name-prefix", "cli-job/")
	if err != nil || !strings.Contains(out, "hello from algo-1") {
		t.Fatalf("filter-log-events: %v\n%s", err, out)
	}
	dst := filepath.Join(t.TempDir(), "model.tar.gz")
	if out, err := s.awscli(ctx, "s3", "cp", "s3://sagebox-default/cli-job/output/model.tar.gz", dst); err != nil {
		t.Fatalf("s3 cp: %v\n%s", err, out)
	}
	if st, err := os.Stat(dst); err != nil || st.Size() == 0 {
		t.Fatalf("downloaded model.tar.gz: %v", err)
	}
	out, err = s.awscli(ctx, "sagemaker", "describe-training-job", "--training-job-name", "no-such-job")
	if err == nil || !strings.Contains(out, "ValidationException") || !strings.Contains(out, "Requested resource not found") {
		t.Errorf("missing job: %v\n%s", err, out)
	}
}

// MaxRuntimeInSeconds stops a job and still uploads its model.
func TestMaxRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), "import os, time\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'partial.txt'), 'w').write('x')\nprint('sleeping', flush=True)\ntime.sleep(600)\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	_, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "too-slow", "--max-run", "2")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (stopped): %s", code, errOut)
	}
	d := s.waitJob(ctx, "too-slow")
	if d.SecondaryStatus != smtypes.SecondaryStatusMaxRuntimeExceeded {
		t.Errorf("SecondaryStatus %s, want MaxRuntimeExceeded", d.SecondaryStatus)
	}
	if elapsed := time.Since(start); elapsed > 45*time.Second {
		t.Errorf("took %s to enforce a 2 s limit", elapsed)
	}
	if files := tarEntries(t, s, aws.ToString(d.ModelArtifacts.S3ModelArtifacts)); files["partial.txt"] != "x" {
		t.Errorf("model.tar.gz = %v, want partial.txt", keys(files))
	}
}

// Killing the server with SIGKILL mid-job loses nothing: the restarted server
// re-adopts the job, which completes with every log line exactly once.
func TestServerKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), `
import os, time
for i in range(1, 41):
    print("line", i, flush=True)
    time.sleep(0.1)
open(os.path.join(os.environ["SM_MODEL_DIR"], "done.txt"), "w").write("done")
`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "survivor", "--no-wait"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	waitForLog(t, s, ctx, "survivor", "line 5")
	s.kill()
	time.Sleep(500 * time.Millisecond)
	s.start()
	d := s.waitJob(ctx, "survivor")
	if d.TrainingJobStatus != "Completed" {
		t.Fatalf("after restart: %s/%s: %s", d.TrainingJobStatus, d.SecondaryStatus, aws.ToString(d.FailureReason))
	}
	logs, _, _ := s.sagebox(ctx, "jobs", "logs", "survivor")
	for i := 1; i <= 40; i++ {
		if n := strings.Count(logs, "line "+strconv.Itoa(i)+"\n"); n != 1 {
			t.Errorf("line %d appears %d times after the restart", i, n)
		}
	}
	if files := tarEntries(t, s, aws.ToString(d.ModelArtifacts.S3ModelArtifacts)); files["done.txt"] != "done" {
		t.Errorf("model.tar.gz = %v", keys(files))
	}
}

// A non-loopback address needs credentials; with them, requests are verified.
func TestAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := (&server{t: t}).runOnce(ctx, "server", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(out, "without credentials") {
		t.Errorf("non-loopback without credentials: %v\n%s", err, out)
	}
	s := startServer(t, "--credentials", "AKIDSAGEBOX:secret123")
	// Wrong secret: refused with the JSON error SDKs understand.
	_, err = s.sm().ListTrainingJobs(ctx, &sagemaker.ListTrainingJobsInput{})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("unsigned-by-a-known-key request: %v", err)
	}
	cfg := s.sdkConfig()
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDSAGEBOX", SecretAccessKey: "secret123"}, nil
	})
	if _, err := sagemaker.NewFromConfig(cfg).ListTrainingJobs(ctx, &sagemaker.ListTrainingJobsInput{}); err != nil {
		t.Errorf("signed request refused: %v", err)
	}
}

func (s *server) runOnce(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := execCommand(ctx, binary, args...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState != nil && !cmd.ProcessState.Exited() {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	return string(out), err
}
