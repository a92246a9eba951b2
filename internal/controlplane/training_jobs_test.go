package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestDescribeTrainingJobGolden pins the whole DescribeTrainingJob shape of
// a freshly created job, as the SageMaker SDK's request produces it.
func TestDescribeTrainingJobGolden(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("Golden-Job"))
	r := e.call(t, "SageMaker.DescribeTrainingJob", map[string]any{"TrainingJobName": "Golden-Job"})
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got bytes.Buffer
	if err := json.Indent(&got, r.body, "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	golden := filepath.Join("testdata", "describe_training_job.golden.json")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("DescribeTrainingJob differs from %s:\n%s", golden, got.String())
	}
}

func TestCreateTrainingJob(t *testing.T) {
	e := newEnv(t)
	out := e.ok(t, "SageMaker.CreateTrainingJob", validJob("My-Job-1"))
	if want := "arn:aws:sagemaker:us-east-1:123456789012:training-job/my-job-1"; out["TrainingJobArn"] != want {
		t.Errorf("TrainingJobArn = %v; want %s", out["TrainingJobArn"], want)
	}
	if submitted, _ := e.runner.calls(); !reflect.DeepEqual(submitted, []string{"My-Job-1"}) {
		t.Errorf("submitted = %v", submitted)
	}
	job, err := e.jobs.TrainingJob(context.Background(), "My-Job-1")
	if err != nil {
		t.Fatal(err)
	}
	if job.TrainingJobStatus != "InProgress" || job.SecondaryStatus != "Starting" || job.ProfilingStatus != "Enabled" {
		t.Errorf("status = %s/%s profiling %s", job.TrainingJobStatus, job.SecondaryStatus, job.ProfilingStatus)
	}
	if len(job.SecondaryStatusTransitions) != 1 || job.SecondaryStatusTransitions[0].StatusMessage != "Preparing the instances for training" {
		t.Errorf("transitions = %+v", job.SecondaryStatusTransitions)
	}
	if !job.CreationTime.Equal(startTime()) || !job.LastModifiedTime.Equal(startTime()) {
		t.Errorf("times = %v %v", job.CreationTime, job.LastModifiedTime)
	}
}

// TestCreateDefaults: a minimal request gets SageMaker's defaults.
func TestCreateDefaults(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateTrainingJob", map[string]any{
		"TrainingJobName":        "minimal",
		"RoleArn":                "arn:aws:iam::123456789012:role/R",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "TrainingInputMode": "File"},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.m5.large"},
		"OutputDataConfig":       map[string]any{"S3OutputPath": "s3://b/out"},
		"Environment":            map[string]any{"SAGEMAKER_PROGRAM": "train.py"},
		"InputDataConfig": []any{map[string]any{"ChannelName": "train", "DataSource": map[string]any{
			"S3DataSource": map[string]any{"S3DataType": "S3Prefix", "S3Uri": "file:///data/train"}}}},
	})
	job, err := e.jobs.TrainingJob(context.Background(), "minimal")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*job.ResourceConfig, sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: 1, VolumeSizeInGB: 30}) {
		t.Errorf("ResourceConfig = %+v", job.ResourceConfig)
	}
	if job.StoppingCondition.MaxRuntimeInSeconds != 86400 {
		t.Errorf("StoppingCondition = %+v", job.StoppingCondition)
	}
	if job.ProfilingStatus != "Disabled" {
		t.Errorf("ProfilingStatus = %s", job.ProfilingStatus)
	}
	if d := job.InputDataConfig[0].DataSource.S3DataSource.S3DataDistributionType; d != "FullyReplicated" {
		t.Errorf("S3DataDistributionType = %q", d)
	}
}

// TestCreateIgnoresServerMembers: members only sagebox sets cannot be
// injected by the request.
func TestCreateIgnoresServerMembers(t *testing.T) {
	e := newEnv(t)
	req := validJob("inject")
	req["TrainingJobStatus"] = "Completed"
	req["ModelArtifacts"] = map[string]any{"S3ModelArtifacts": "s3://evil/model.tar.gz"}
	req["CreationTime"] = 1
	req["FailureReason"] = "x"
	e.ok(t, "SageMaker.CreateTrainingJob", req)
	job, _ := e.jobs.TrainingJob(context.Background(), "inject")
	if job.TrainingJobStatus != "InProgress" || job.ModelArtifacts != nil || job.FailureReason != "" || !job.CreationTime.Equal(startTime()) {
		t.Errorf("server members taken from the request: %+v", job)
	}
}

func TestCreateDuplicate(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("dup"))
	for _, name := range []string{"dup", "DUP"} {
		r := e.call(t, "SageMaker.CreateTrainingJob", validJob(name))
		code, msg := r.errorOf(t)
		want := "Training job names must be unique within an AWS account and region, and a training job with this name already exists (arn:aws:sagemaker:us-east-1:123456789012:training-job/dup)"
		if r.status != 400 || code != "ResourceInUse" || msg != want {
			t.Errorf("%s: got %d %s %q", name, r.status, code, msg)
		}
	}
	if submitted, _ := e.runner.calls(); len(submitted) != 1 {
		t.Errorf("submitted %v; the duplicate must not reach the runner", submitted)
	}
}

// TestCreateSubmitFails: a job the runner refuses exists and is Failed.
func TestCreateSubmitFails(t *testing.T) {
	e := newEnv(t)
	e.runner.set(func(f *fakeRunner) {
		f.SubmitFunc = func(context.Context, string) error { return errors.New("no python interpreter with torch") }
	})
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("refused"))
	d := e.ok(t, "SageMaker.DescribeTrainingJob", map[string]any{"TrainingJobName": "refused"})
	if d["TrainingJobStatus"] != "Failed" || d["SecondaryStatus"] != "Failed" {
		t.Errorf("status = %v/%v", d["TrainingJobStatus"], d["SecondaryStatus"])
	}
	if r, _ := d["FailureReason"].(string); !strings.Contains(r, "no python interpreter with torch") {
		t.Errorf("FailureReason = %q", r)
	}
	if d["TrainingEndTime"] == nil {
		t.Error("TrainingEndTime missing")
	}
	tr := d["SecondaryStatusTransitions"].([]any)
	if len(tr) != 2 || tr[0].(map[string]any)["EndTime"] == nil || tr[1].(map[string]any)["StatusMessage"] != "Training job failed" {
		t.Errorf("transitions = %v", tr)
	}
}

func TestStopTrainingJob(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("running"))
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("done"))
	if _, err := e.jobs.UpdateTrainingJob(context.Background(), "done", func(j *sagebox.TrainingJob) error {
		j.TrainingJobStatus = "Completed"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)

	tests := []struct {
		name, job string
		code, msg string
	}{
		{"missing", "nope", "ValidationException", "Requested resource not found."},
		{"running", "running", "", ""},
		{"already stopping", "running", "ValidationException", "The request was rejected because the training job is in status Stopping."},
		{"completed", "done", "ValidationException", "The request was rejected because the training job is in status Completed."},
		{"bad name", "no_underscores", "ValidationException", "1 validation error detected: Value 'no_underscores' at 'trainingJobName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "SageMaker.StopTrainingJob", map[string]any{"TrainingJobName": tt.job})
			if tt.code == "" {
				if r.status != 200 || string(r.body) != "{}" {
					t.Fatalf("got %d %s; want 200 {}", r.status, r.body)
				}
				return
			}
			code, msg := r.errorOf(t)
			if r.status != 400 || code != tt.code || msg != tt.msg {
				t.Errorf("got %d %s %q; want 400 %s %q", r.status, code, msg, tt.code, tt.msg)
			}
		})
	}
	if _, stopped := e.runner.calls(); !reflect.DeepEqual(stopped, []string{"running"}) {
		t.Errorf("runner stopped %v; want [running]", stopped)
	}
	d := e.ok(t, "SageMaker.DescribeTrainingJob", map[string]any{"TrainingJobName": "running"})
	tr := d["SecondaryStatusTransitions"].([]any)
	last := tr[len(tr)-1].(map[string]any)
	if d["TrainingJobStatus"] != "Stopping" || d["SecondaryStatus"] != "Stopping" || last["StatusMessage"] != "Stopping the training job" {
		t.Errorf("after stop: %v/%v, last transition %v", d["TrainingJobStatus"], d["SecondaryStatus"], last)
	}
	if want := float64(startTime().Add(time.Minute).Unix()); d["LastModifiedTime"] != want {
		t.Errorf("LastModifiedTime = %v; want %v", d["LastModifiedTime"], want)
	}
}

func TestListTrainingJobs(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 12; i++ {
		e.ok(t, "SageMaker.CreateTrainingJob", validJob(fmt.Sprintf("job-%02d", i)))
		e.clock.Advance(time.Second)
	}
	first := e.ok(t, "SageMaker.ListTrainingJobs", map[string]any{})
	sums := first["TrainingJobSummaries"].([]any)
	if len(sums) != 10 || first["NextToken"] == nil {
		t.Fatalf("first page: %d summaries, token %v; want 10 and a token", len(sums), first["NextToken"])
	}
	top := sums[0].(map[string]any)
	wantTop := map[string]any{
		"TrainingJobName":   "job-11",
		"TrainingJobArn":    "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-11",
		"CreationTime":      float64(startTime().Add(11 * time.Second).Unix()),
		"LastModifiedTime":  float64(startTime().Add(11 * time.Second).Unix()),
		"TrainingJobStatus": "InProgress",
	}
	if !reflect.DeepEqual(top, wantTop) {
		t.Errorf("newest summary = %v\nwant %v", top, wantTop)
	}
	second := e.ok(t, "SageMaker.ListTrainingJobs", map[string]any{"NextToken": first["NextToken"]})
	sums = second["TrainingJobSummaries"].([]any)
	if len(sums) != 2 || second["NextToken"] != nil {
		t.Errorf("second page: %d summaries, token %v; want 2 and none", len(sums), second["NextToken"])
	}
	if sums[1].(map[string]any)["TrainingJobName"] != "job-00" {
		t.Errorf("last = %v", sums[1])
	}

	filtered := e.ok(t, "SageMaker.ListTrainingJobs", map[string]any{
		"NameContains": "JOB-0", "SortBy": "Name", "SortOrder": "Ascending", "MaxResults": 3,
		"CreationTimeAfter": startTime().Unix(), "CreationTimeBefore": float64(startTime().Add(8*time.Second).UnixMilli()) / 1000,
	})
	var names []string
	for _, s := range filtered["TrainingJobSummaries"].([]any) {
		names = append(names, s.(map[string]any)["TrainingJobName"].(string))
	}
	if !reflect.DeepEqual(names, []string{"job-01", "job-02", "job-03"}) || filtered["NextToken"] == nil {
		t.Errorf("filtered = %v, token %v", names, filtered["NextToken"])
	}

	r := e.call(t, "SageMaker.ListTrainingJobs", map[string]any{"NextToken": "bogus"})
	if code, _ := r.errorOf(t); r.status != 400 || code != "ValidationException" {
		t.Errorf("bogus token: %d %s", r.status, code)
	}
	r = e.call(t, "SageMaker.ListTrainingJobs", map[string]any{"NextToken": first["NextToken"], "SortBy": "Name"})
	if code, _ := r.errorOf(t); r.status != 400 || code != "ValidationException" {
		t.Errorf("token of another sort: %d %s", r.status, code)
	}
	warm := e.ok(t, "SageMaker.ListTrainingJobs", map[string]any{"WarmPoolStatusEquals": "Available"})
	if len(warm["TrainingJobSummaries"].([]any)) != 0 {
		t.Error("warm pool filter matched jobs")
	}
}
