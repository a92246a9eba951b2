package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sdkAttach replays, with boto3, the SageMaker SDK's requests for fit()'s
// CreateTrainingJob and for PyTorch.attach() (sdk-v2-audit §1.1-1.2): attach
// reads DescribeTrainingJob by index, lists the job's tags, parses the
// training image for the framework and py versions and json.loads every
// hyperparameter; on a running job it then follows logs_for_job's
// DescribeLogStreams/GetLogEvents loop until the job ends. Every key the
// audit marks as a hard read is read with [] here, so a missing one fails
// the script with KeyError.
//
// argv: RELEASE_FILE CLI_JOB. Prints one JSON object.
const sdkAttach = `
import io, json, os, re, sys, tarfile, time
import boto3
url = os.environ["SAGEBOX_URL"]
release, cli_job = sys.argv[1], sys.argv[2]
sm = boto3.client("sagemaker", endpoint_url=url)
s3 = boto3.client("s3", endpoint_url=url)
logs = boto3.client("logs", endpoint_url=url)
GROUP = "/aws/sagemaker/TrainingJobs"
bucket = "sagemaker-us-east-1-123456789012"
s3.create_bucket(Bucket=bucket)

def upload_source(job, src):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py"); info.size = len(src)
        tar.addfile(info, io.BytesIO(src))
    key = job + "/source/sourcedir.tar.gz"
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue(), ServerSideEncryption="aws:kms")
    return "s3://%s/%s" % (bucket, key)

def fit(job, src, env=None, tags=None):
    # CreateTrainingJob as PyTorch(entry_point="train.py", framework_version="1.13.1",
    # py_version="py39", instance_type="ml.m5.xlarge", tags=...).fit() sends it.
    uri = upload_source(job, src)
    hps = {"sagemaker_program": "train.py", "sagemaker_submit_directory": uri,
           "sagemaker_container_log_level": 20, "sagemaker_job_name": job, "sagemaker_region": "us-east-1"}
    req = dict(
        TrainingJobName=job,
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-cpu-py39",
                                "TrainingInputMode": "File", "EnableSageMakerMetricsTimeSeries": True},
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        OutputDataConfig={"S3OutputPath": "s3://%s/" % bucket},
        ResourceConfig={"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        HyperParameters={k: json.dumps(v) for k, v in hps.items()},
        DebugHookConfig={"S3OutputPath": "s3://%s/" % bucket, "CollectionConfigurations": []},
        ProfilerConfig={"S3OutputPath": "s3://%s/" % bucket, "DisableProfiler": False},
    )
    if env: req["Environment"] = env
    if tags: req["Tags"] = tags
    return sm.create_training_job(**req)["TrainingJobArn"]

def attach(job):
    d = sm.describe_training_job(TrainingJobName=job)
    init = dict(
        role=d["RoleArn"], instance_count=d["ResourceConfig"]["InstanceCount"],
        instance_type=d["ResourceConfig"]["InstanceType"], volume_size=d["ResourceConfig"]["VolumeSizeInGB"],
        max_run=d["StoppingCondition"]["MaxRuntimeInSeconds"], input_mode=d["AlgorithmSpecification"]["TrainingInputMode"],
        job_name=d["TrainingJobName"], output_path=d["OutputDataConfig"]["S3OutputPath"],
        output_kms_key=d["OutputDataConfig"]["KmsKeyId"],
    )
    for k in ("EnableNetworkIsolation", "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining"):
        init[k] = d[k]  # AWS always returns them; the SDK tests them with "in"
    hp = {k: json.loads(v) for k, v in d["HyperParameters"].items()}
    init["entry_point"] = hp["sagemaker_program"]
    init["source_dir"] = hp["sagemaker_submit_directory"]
    init["log_level"] = hp["sagemaker_container_log_level"]
    image = d["AlgorithmSpecification"]["TrainingImage"]
    m = re.match(r"^\d+\.dkr\.ecr\.[^/]+\.amazonaws\.com/pytorch-training:(.*)-(cpu|gpu)-(py3\d*)$", image)
    init["framework_version"], init["py_version"] = (m.group(1), m.group(3)) if m else (None, None)
    init["channels"] = [c["ChannelName"] for c in d.get("InputDataConfig", [])]
    tags = sm.list_tags(ResourceArn=d["TrainingJobArn"])["Tags"]
    init["tags"] = [[t["Key"], t["Value"]] for t in tags]
    return d, init

def status_keys(d):
    # What logs_for_job and wait_for_job read by index on every Describe.
    d["TrainingJobStatus"]; d["LastModifiedTime"].timetuple(); d["ResourceConfig"]["InstanceCount"]
    for t in d["SecondaryStatusTransitions"]:
        t["Status"], t["StatusMessage"]
    return d["SecondaryStatusTransitions"][-1]["StatusMessage"]

def logs_for_job(job, instance_count, on_lines):
    positions, lines, polls, done = {}, [], 0, False
    d = sm.describe_training_job(TrainingJobName=job)
    status_keys(d)
    while True:
        polls += 1
        r = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=job + "/",
                                      orderBy="LogStreamName", limit=min(instance_count, 50))
        assert "nextToken" not in r, r
        for s in [x["logStreamName"] for x in r["logStreams"]]:
            start, skip = positions.get(s, (0, 0))
            token, count = None, 1
            while count > 0:
                kw = dict(logGroupName=GROUP, logStreamName=s, startTime=start, startFromHead=True)
                if token: kw["nextToken"] = token
                page = logs.get_log_events(**kw)
                token = page["nextForwardToken"]
                events = page["events"]
                count = len(events)
                if count > skip:
                    events, skip = events[skip:], 0
                else:
                    events, skip = [], skip - count
                for ev in events:
                    lines.append(ev["message"])
                    ts = ev["timestamp"]
                    start, skip = (start, skip + 1) if ts == start and (s in positions or skip) else (ts, 1)
                    positions[s] = (start, skip)
        on_lines(lines)
        if done:
            return d, lines, polls
        d = sm.describe_training_job(TrainingJobName=job)
        status_keys(d)
        if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            done = True
        time.sleep(0.05)

out = {}
# A finished job, made by fit() with tags.
done_arn = fit("attach-done", b"import os\nprint('trained', flush=True)\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'model.pth'), 'w').write('w')\n",
               tags=[{"Key": "project", "Value": "attach"}, {"Key": "owner", "Value": "sdk"}])
while sm.describe_training_job(TrainingJobName="attach-done")["TrainingJobStatus"] == "InProgress":
    time.sleep(0.1)
d, init = attach("attach-done")
init["model_data"] = d["ModelArtifacts"]["S3ModelArtifacts"]
init["arn"] = done_arn
out["done"] = init

# A running job: attach, then follow its logs until it ends.
fit("attach-running", b"import os, time\nprint('waiting for release', flush=True)\n"
    b"while not os.path.exists(os.environ['RELEASE_FILE']): time.sleep(0.05)\nprint('released', flush=True)\n",
    env={"RELEASE_FILE": release})
while True:
    d = sm.describe_training_job(TrainingJobName="attach-running")
    if d["SecondaryStatus"] == "Training": break
    time.sleep(0.05)
d, init = attach("attach-running")
init["status_at_attach"] = d["TrainingJobStatus"]
def release_when_waiting(lines):
    if "waiting for release" in lines and not os.path.exists(release):
        open(release, "w").write("go")
final, lines, polls = logs_for_job("attach-running", init["instance_count"], release_when_waiting)
init["lines"], init["final_status"], init["polls"] = lines, final["TrainingJobStatus"], polls
init["model_data"] = final["ModelArtifacts"]["S3ModelArtifacts"]
out["running"] = init

# A job the sagebox CLI made.
d, init = attach(cli_job)
init["model_data"] = d["ModelArtifacts"]["S3ModelArtifacts"]
out["cli"] = init
print(json.dumps(out))
`

type attached struct {
	Role             string      `json:"role"`
	InstanceType     string      `json:"instance_type"`
	InstanceCount    int         `json:"instance_count"`
	EntryPoint       string      `json:"entry_point"`
	SourceDir        string      `json:"source_dir"`
	ModelData        string      `json:"model_data"`
	Arn              string      `json:"arn"`
	KmsKey           string      `json:"output_kms_key"`
	FrameworkVersion *string     `json:"framework_version"`
	PyVersion        *string     `json:"py_version"`
	Tags             [][2]string `json:"tags"`
	Lines            []string    `json:"lines"`
	StatusAtAttach   string      `json:"status_at_attach"`
	FinalStatus      string      `json:"final_status"`
	Isolation        *bool       `json:"EnableNetworkIsolation"`
}

// TestSDKAttachAndTags: fit's CreateTrainingJob (with tags), then attach on
// a finished job, on a running one (its logs streamed until it ends) and on
// a job the sagebox CLI made; then the tags through the AWS CLI.
func TestSDKAttachAndTags(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	requireTool(t, "/usr/bin/aws")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), "import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'w.txt'), 'w').write('ok')\n")
	if out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "cli-attach"); code != 0 {
		t.Fatalf("sagebox train: %d\n%s\n%s", code, out, errOut)
	}

	release := filepath.Join(t.TempDir(), "release")
	out, err := s.python(ctx, sdkAttach, release, "cli-attach")
	if err != nil {
		t.Fatalf("attach replay: %v\n%s", err, out)
	}
	var got map[string]attached
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "\n{")+1:]), &got); err != nil {
		t.Fatalf("script output: %v\n%s", err, out)
	}
	str := func(p *string) string {
		if p == nil {
			return "<None>"
		}
		return *p
	}
	done := got["done"]
	if done.KmsKey != "" || done.Isolation == nil || *done.Isolation {
		t.Errorf("KmsKeyId %q, EnableNetworkIsolation %v: want \"\" and false", done.KmsKey, done.Isolation)
	}
	if done.ModelData != "s3://sagemaker-us-east-1-123456789012/attach-done/output/model.tar.gz" ||
		done.EntryPoint != "train.py" || done.SourceDir != "s3://sagemaker-us-east-1-123456789012/attach-done/source/sourcedir.tar.gz" ||
		str(done.FrameworkVersion) != "1.13.1" || str(done.PyVersion) != "py39" || done.InstanceType != "ml.m5.xlarge" {
		t.Errorf("attached estimator of a finished job = %+v", done)
	}
	if want := [][2]string{{"project", "attach"}, {"owner", "sdk"}}; !reflect.DeepEqual(done.Tags, want) {
		t.Errorf("tags from CreateTrainingJob = %v, want %v", done.Tags, want)
	}

	running := got["running"]
	if running.StatusAtAttach != "InProgress" || running.FinalStatus != "Completed" {
		t.Errorf("running job: attached while %s, ended %s", running.StatusAtAttach, running.FinalStatus)
	}
	if !reflect.DeepEqual(running.Lines, []string{"waiting for release", "released"}) {
		t.Errorf("logs streamed after attach = %q, want both lines once each", running.Lines)
	}
	if running.Tags == nil || len(running.Tags) != 0 {
		t.Errorf("untagged job's tags = %#v, want []", running.Tags)
	}

	cli := got["cli"]
	if v := str(cli.FrameworkVersion); !regexp.MustCompile(`^\d+\.\d+$`).MatchString(v) || !strings.HasPrefix(str(cli.PyVersion), "py3") {
		t.Errorf("attach() on a CLI job: framework_version %s, py_version %s; want MAJOR.MINOR and py3N", v, str(cli.PyVersion))
	}
	if cli.EntryPoint != "train.py" || cli.ModelData != "s3://sagebox-default/cli-attach/output/model.tar.gz" {
		t.Errorf("attached estimator of a CLI job = %+v", cli)
	}

	// Tags through the AWS CLI.
	arn := done.Arn
	if out, err := s.awscli(ctx, "sagemaker", "add-tags", "--resource-arn", arn, "--tags", "Key=owner,Value=cli", "Key=env,Value=test"); err != nil {
		t.Fatalf("add-tags: %v\n%s", err, out)
	}
	if out, err := s.awscli(ctx, "sagemaker", "delete-tags", "--resource-arn", arn, "--tag-keys", "project"); err != nil {
		t.Fatalf("delete-tags: %v\n%s", err, out)
	}
	out, err = s.awscli(ctx, "sagemaker", "list-tags", "--resource-arn", arn)
	if err != nil {
		t.Fatalf("list-tags: %v\n%s", err, out)
	}
	var listed struct{ Tags []struct{ Key, Value string } }
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list-tags output: %v\n%s", err, out)
	}
	if want := []struct{ Key, Value string }{{"owner", "cli"}, {"env", "test"}}; !reflect.DeepEqual(listed.Tags, want) {
		t.Errorf("list-tags = %+v, want %+v", listed.Tags, want)
	}
	out, err = s.awscli(ctx, "sagemaker", "list-tags", "--resource-arn", "arn:aws:sagemaker:us-east-1:123456789012:training-job/nobody")
	if err == nil || !strings.Contains(out, "ValidationException") || !strings.Contains(out, "Requested resource not found") {
		t.Errorf("list-tags of an unknown job: %v\n%s", err, out)
	}
	out, err = s.awscli(ctx, "sagemaker", "add-tags", "--resource-arn", "not-an-arn", "--tags", "Key=a,Value=b")
	if err == nil || !strings.Contains(out, "failed to satisfy constraint: Member must satisfy regular expression pattern") {
		t.Errorf("add-tags with a bad ARN: %v\n%s", err, out)
	}
	_ = os.Remove(release)
}
