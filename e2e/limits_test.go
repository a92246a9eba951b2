package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// limitsPreamble is boto3 code shared by the limit tests: clients, a
// bucket, job() to create a training job from a source archive, wait().
const limitsPreamble = `
import io, json, os, tarfile, threading, time, boto3
url = os.environ["SAGEBOX_URL"]
c = lambda svc: boto3.client(svc, endpoint_url=url, region_name="us-east-1")
sm, s3 = c("sagemaker"), c("s3")
s3.create_bucket(Bucket="lim")
def tgz(files, extra=None):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:gz") as t:
        for n, body in files.items():
            i = tarfile.TarInfo(n); i.size = len(body); t.addfile(i, io.BytesIO(body))
        if extra: extra(t)
    return b.getvalue()
def job(name, src, count=1, volume=1):
    s3.put_object(Bucket="lim", Key=name + ".tgz", Body=src)
    return sm.create_training_job(TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/R",
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://lim/out"},
        ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": count, "VolumeSizeInGB": volume},
        StoppingCondition={"MaxRuntimeInSeconds": 600},
        HyperParameters={"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps("s3://lim/" + name + ".tgz")})
def wait(name):
    for _ in range(1200):
        d = sm.describe_training_job(TrainingJobName=name)
        if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"): return d
        time.sleep(0.1)
`

// TestArchiveLimitsAndRetention: a source directory that would unpack past
// the job's volume fails the job with a reason naming the limit (R6), and a
// finished job's workspace is gone once its artifacts are uploaded (R7).
func TestArchiveLimitsAndRetention(t *testing.T) {
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := s.python(ctx, limitsPreamble+`
def bomb(t):  # a member that claims 2 GiB: refused before a byte of it is written
    i = tarfile.TarInfo("zeros.bin"); i.size = 2 << 30
    t.fileobj.write(i.tobuf(tarfile.GNU_FORMAT))
job("bomb", tgz({"train.py": b"print(1)\n"}, bomb))
d = wait("bomb"); print("BOMB", d["TrainingJobStatus"], d.get("FailureReason", ""))
many = {"train.py": b"print(1)\n"}
many.update({"f%05d" % i: b"" for i in range(10001)})
job("many", tgz(many))
d = wait("many"); print("MANY", d["TrainingJobStatus"], d.get("FailureReason", ""))
job("fine", tgz({"train.py": b"import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm.txt'), 'w').write('ok')\n"}))
d = wait("fine"); print("FINE", d["TrainingJobStatus"], d["ModelArtifacts"]["S3ModelArtifacts"])
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mustContain(t, "job results", out,
		`BOMB Failed ClientError: sourcedir s3://lim/bomb.tgz was refused: archive unpacks to more than 1.0 GiB (1073741824 bytes) (stopped at "zeros.bin"); the limit (ResourceConfig.VolumeSizeInGB is 1) is what the job's volume can hold`,
		`MANY Failed ClientError: sourcedir s3://lim/many.tgz was refused: archive has more than 10000 entries`,
		"FINE Completed s3://lim/out/fine/output/model.tar.gz")
	for _, job := range []string{"bomb", "many", "fine"} {
		if _, err := os.Stat(filepath.Join(s.dataDir, "jobs", job)); !os.IsNotExist(err) {
			t.Errorf("jobs/%s is still on disk after the job ended (%v)", job, err)
		}
	}
}

// TestCapacityQueuesJobs: with room for two hosts, six sleeping jobs never
// run more than two at once; the rest wait in Starting saying why, and all
// complete (R5). A job larger than the whole machine is refused at once.
func TestCapacityQueuesJobs(t *testing.T) {
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServer(t, "--capacity-slots", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("RUNS_DIR", t.TempDir())
	out, err := s.python(ctx, limitsPreamble+`
runs = os.path.join(os.environ["RUNS_DIR"], "runs.txt")
src = tgz({"train.py": ("import time\nf = open(%r, 'a')\nf.write('%%f 1\\n' %% time.time()); f.flush()\ntime.sleep(2)\nf.write('%%f -1\\n' %% time.time())\n" % runs).encode()})
names = ["q%d" % i for i in range(6)]
for n in names: job(n, src)
peak, waiting_msgs, done = 0, set(), set()
while len(done) < len(names):
    running = 0
    for n in names:
        d = sm.describe_training_job(TrainingJobName=n)
        if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            done.add(n); continue
        if d["SecondaryStatus"] in ("Downloading", "Training", "Uploading"): running += 1
        for tr in d["SecondaryStatusTransitions"]:
            if tr["StatusMessage"].startswith("Waiting for capacity"): waiting_msgs.add(tr["StatusMessage"])
    time.sleep(0.1)
level = 0
for line in sorted(open(runs).read().split("\n")[:-1], key=lambda l: (float(l.split()[0]), int(l.split()[1]))):
    level += int(line.split()[1]); peak = max(peak, level)
print("PEAK_OK", peak == 2, peak)
print("STATUSES", sorted(sm.describe_training_job(TrainingJobName=n)["TrainingJobStatus"] for n in names))
print("WAITED", len(waiting_msgs) > 0)
for m in sorted(waiting_msgs)[:1]: print("MSG", m)
try:
    job("huge", src, count=3)
except Exception as e:
    print("HUGE", type(e).__name__, e)
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mustContain(t, "capacity", out, "PEAK_OK True", "STATUSES ['Completed', 'Completed', 'Completed', 'Completed', 'Completed', 'Completed']",
		"WAITED True", "MSG Waiting for capacity: the job's 1 instance(s) need 1 slots, 512 MiB of memory, and other jobs or endpoints hold the machine's",
		"HUGE ResourceLimitExceeded An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob operation: The sagebox limit on instances per training job is 2; the request asked for 3 instances.")
}
