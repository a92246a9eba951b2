package controlplane_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// python is Debian's interpreter, where python3-boto3 installs boto3.
const python = "/usr/bin/python3"

// requireBoto3 skips the test when boto3 is missing, unless
// SAGEBOX_STRICT_TOOLS=1 makes that a failure.
func requireBoto3(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import boto3").Run(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("boto3 is required (SAGEBOX_STRICT_TOOLS=1): %s -c 'import boto3': %v", python, err)
		}
		t.Skipf("boto3 not available to %s: %v", python, err)
	}
}

// TestBoto3 runs testdata/boto3_client.py: botocore's serialisation of
// the training-job calls and the exact log-reading loop of the SageMaker
// SDK's logs_for_job.
func TestBoto3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python")
	}
	requireBoto3(t)
	e := newEnv(t)
	const job = "boto-job"
	// The fake runner writes each host's first lines as a job would.
	submit := func(ctx context.Context, name string) error {
		if name != job {
			return nil
		}
		for _, host := range []struct {
			name  string
			lines []string
		}{
			{"algo-1", []string{"starting", "epoch 1 loss=0.5", "epoch 2 loss=0.25"}},
			{"algo-2", []string{"starting", "ERROR worker 2 warning", "done"}},
		} {
			var evs []sagebox.LogEvent
			for i, l := range host.lines {
				// Two lines share a millisecond to exercise the SDK's skip logic.
				evs = append(evs, sagebox.LogEvent{Timestamp: int64(1000 + i/2*10), Message: l})
			}
			if err := e.logs.Append(ctx, sagebox.TrainingLogGroup, name+"/"+host.name+"-1772366400", evs); err != nil {
				return err
			}
		}
		return nil
	}
	e.runner.set(func(f *fakeRunner) { f.SubmitFunc = submit })

	cmd := exec.Command(python, "testdata/boto3_client.py", e.srv.URL, job)
	cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("boto3 script: %v\n%s", err, stderr.String())
	}
	var got struct {
		Arn          string
		Duplicate    string
		DescribeRaw  map[string]any `json:"describe"`
		Missing      []string
		Listed       []string
		ListedResume []string `json:"listed_resumed"`
		Streams      []string
		Printed      []string
		PrintedAgain []string `json:"printed_again"`
		MissingGroup string   `json:"missing_group"`
		Filtered     []string
		FilteredRes  []string `json:"filtered_resumed"`
		Stopped      string
		StopAgain    string `json:"stop_again"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("script output %q: %v", stdout, err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v\nwant %v", what, got, want)
		}
	}
	check("arn", got.Arn, "arn:aws:sagemaker:us-east-1:123456789012:training-job/boto-job")
	check("duplicate", got.Duplicate, "ResourceInUse")
	check("describe", got.DescribeRaw, map[string]any{
		"status": "InProgress", "secondary": "Starting", "message": "Preparing the instances for training",
		"last_modified": "2026-03-01T12:00:00+00:00", "instance_count": float64(2), "profiling": "Enabled",
	})
	check("missing", got.Missing, []string{"ValidationException", "Requested resource not found."})
	check("listed", got.Listed, []string{"boto-job-2", "boto-job"})
	check("streams", got.Streams, []string{"boto-job/algo-1-1772366400", "boto-job/algo-2-1772366400"})
	check("printed", got.Printed, []string{
		"boto-job/algo-1-1772366400 starting", "boto-job/algo-1-1772366400 epoch 1 loss=0.5",
		"boto-job/algo-2-1772366400 starting", "boto-job/algo-2-1772366400 ERROR worker 2 warning",
		"boto-job/algo-1-1772366400 epoch 2 loss=0.25", "boto-job/algo-2-1772366400 done",
	})
	check("printed again", len(got.PrintedAgain), 0)
	check("missing group", got.MissingGroup, "ResourceNotFoundException")
	check("filtered", got.Filtered, []string{
		"boto-job/algo-1-1772366400 epoch 1 loss=0.5", "boto-job/algo-2-1772366400 ERROR worker 2 warning",
		"boto-job/algo-1-1772366400 epoch 2 loss=0.25",
	})
	check("listed, resumed from each raw NextToken", got.ListedResume, got.Listed)
	check("filtered, resumed from each raw nextToken", got.FilteredRes, got.Filtered)
	check("stopped", got.Stopped, "Stopping")
	check("stop again", got.StopAgain, "The request was rejected because the training job is in status Stopping.")
}

// TestBoto3Hosting runs testdata/boto3_hosting.py: the SageMaker SDK's
// hosting call sequences (estimator.deploy, update_endpoint,
// UpdateEndpointWeightsAndCapacities, delete_model, delete_endpoint,
// PipelineModel.deploy) through botocore, with hosting faked to promote
// each deployment 100 ms after it was asked for.
func TestBoto3Hosting(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python")
	}
	requireBoto3(t)
	e := newEnv(t)
	const name = "pytorch-training-2026-03-01-12-00-00-000"
	e.ok(t, "SageMaker.CreateTrainingJob", validJob(name))
	e.hosting.set(func(f *fakeHosting) { f.promoteAfter = 100 * time.Millisecond })

	cmd := exec.Command(python, "testdata/boto3_hosting.py", e.srv.URL)
	cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("boto3 script: %v\n%s", err, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("script output %q: %v", stdout, err)
	}
	arn := func(kind, n string) string { return "arn:aws:sagemaker:us-east-1:123456789012:" + kind + "/" + n }
	deployed := func(n string) map[string]any {
		return map[string]any{
			"duplicate_model": []any{"ValidationException", `Cannot create already existing model "` + arn("model", n) + `".`},
			"arn":             arn("endpoint", n), "first_status": "Creating", "statuses": []any{"Creating", "InService"},
			"config_name": n, "variants": []any{[]any{"AllTraffic", 1.0, 1.0}},
		}
	}
	pipeline := deployed("pytorch-inference-2026-03-01-12-00-01-000")
	pipeline["containers"], pipeline["has_primary"] = 2.0, false
	variant := map[string]any{"VariantName": "AllTraffic", "ModelName": name, "InitialVariantWeight": 1.0, "InitialInstanceCount": 1.0, "InstanceType": "ml.m5.xlarge"}
	want := map[string]any{
		"deploy":        deployed(name),
		"tags":          map[string]any{"model": []any{}, "endpoint-config": []any{}, "endpoint": []any{}, "training-job": []any{}},
		"endpoint_tags": []any{map[string]any{"Key": "stage", "Value": "dev"}},
		"update": map[string]any{
			"models": []any{name}, "config_tags": []any{}, "arn": arn("endpoint", name), "first_status": "Updating",
			"statuses": []any{"Updating", "InService"}, "config_name": name + "-2", "new_variants": []any{variant},
		},
		"weights":            map[string]any{"arn": arn("endpoint", name), "statuses": []any{"Updating", "InService"}, "variants": []any{[]any{"AllTraffic", 2.0}}},
		"unknown_variant":    []any{"ValidationException", `The variant "Nope" is not present in endpoint "` + arn("endpoint", name) + `": its variants are AllTraffic.`},
		"after_delete_model": "InService",
		"gone":               `Could not find endpoint "` + arn("endpoint", name) + `".`,
		"config_gone":        []any{"ValidationException", `Could not find endpoint configuration "` + arn("endpoint-config", name+"-2") + `".`},
		"model_gone":         []any{"ValidationException", `Could not find model "` + arn("model", name) + `".`},
		"old_config":         name,
		"pipeline":           pipeline,
		"listed":             []any{"pytorch-inference-2026-03-01-12-00-01-000"},
		"models":             []any{"pytorch-inference-2026-03-01-12-00-01-000"},
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s =\n %v\nwant\n %v", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, got[k])
		}
	}
}
