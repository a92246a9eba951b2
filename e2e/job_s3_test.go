package e2e

import (
	"context"
	"testing"
	"time"
)

// TestJobReachesSageboxS3WithDebiansBoto3: a training script's plain
// boto3.client("s3") — no endpoint_url, Debian's botocore 1.29, which
// ignores AWS_ENDPOINT_URL by itself — talks to sagebox's S3, as the README
// promises (R15: it went to s3.amazonaws.com).
func TestJobReachesSageboxS3WithDebiansBoto3(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := s.python(ctx, `
import io, os, tarfile, time, boto3, botocore
print("BOTOCORE", botocore.__version__)
url = os.environ["SAGEBOX_URL"]
c = lambda svc: boto3.client(svc, endpoint_url=url, region_name="us-east-1")
sm, s3, logs = c("sagemaker"), c("s3"), c("logs")
src = b'''import boto3, botocore
s3 = boto3.client("s3")
print("ENDPOINT=" + s3.meta.endpoint_url)
s3.put_object(Bucket="r15", Key="from-job.txt", Body=b"written by the job")
print("READ=" + s3.get_object(Bucket="r15", Key="input.txt")["Body"].read().decode())
'''
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w:gz") as t:
    i = tarfile.TarInfo("train.py"); i.size = len(src); t.addfile(i, io.BytesIO(src))
s3.create_bucket(Bucket="r15")
s3.put_object(Bucket="r15", Key="src.tar.gz", Body=b.getvalue())
s3.put_object(Bucket="r15", Key="input.txt", Body=b"hello from sagebox")
sm.create_training_job(TrainingJobName="r15", RoleArn="arn:aws:iam::123456789012:role/R",
    AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
    OutputDataConfig={"S3OutputPath": "s3://r15/out"},
    ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
    StoppingCondition={"MaxRuntimeInSeconds": 600},
    HyperParameters={"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://r15/src.tar.gz"'})
for _ in range(400):
    d = sm.describe_training_job(TrainingJobName="r15")
    if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"): break
    time.sleep(0.25)
print("STATUS", d["TrainingJobStatus"], d.get("FailureReason", ""))
print("OBJECT", s3.get_object(Bucket="r15", Key="from-job.txt")["Body"].read().decode())
for st in logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix="r15/")["logStreams"]:
    for e in logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=st["logStreamName"], startFromHead=True)["events"]:
        print("LOG", e["message"])
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mustContain(t, "job output", out, "BOTOCORE 1.29", "STATUS Completed", "LOG ENDPOINT="+s.URL, "LOG READ=hello from sagebox", "OBJECT written by the job")
}
