package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/sagebox/sagebox/internal/archive"
)

// treeFiles maps every regular file under dir (relative, slash-separated)
// to its content.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileNames(m map[string]string) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// TestStageCollectOverS3 runs a two-host job on the server (the local
// path: hard links out of the object store), then does what a pod would do
// with only the endpoint: `sagebox stage` for algo-2 must produce the tree
// the server staged for algo-2, and `sagebox collect` over both hosts'
// trees must upload a model.tar.gz byte-for-byte equal to the server's.
func TestStageCollectOverS3(t *testing.T) {
	requireTool(t, "/usr/bin/python3", "-c", "pass")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := s.s3()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "train.py"), `import os, json
sm = os.environ
open(os.path.join(sm["SM_MODEL_DIR"], "model-" + sm["SM_CURRENT_HOST"] + ".txt"), "w").write("weights of " + sm["SM_CURRENT_HOST"])
open(os.path.join(sm["SM_MODEL_DIR"], "shared.txt"), "w").write(sm["SM_CURRENT_HOST"])
open(os.path.join(sm["SM_OUTPUT_DATA_DIR"], "metrics.json"), "w").write(json.dumps({"host": sm["SM_CURRENT_HOST"]}))
open(os.path.join(sm["SM_CHANNEL_TRAIN"], "..", "..", "..", "checkpoints", "ck-" + sm["SM_CURRENT_HOST"]), "w").write("ck")
`)
	writeFile(t, filepath.Join(src, "lib", "util.py"), "X = 1\n")
	var tgz bytes.Buffer
	if err := archive.WriteTarGz(ctx, &tgz, src); err != nil {
		t.Fatal(err)
	}
	put("job/source/sourcedir.tar.gz", tgz.Bytes())
	put("ds/train/a.csv", []byte("1,2\n"))
	put("ds/train/sub/b.csv", []byte("3,4\n"))
	for i := range 5 {
		put("ds/shards/part-"+string(rune('0'+i)), bytes.Repeat([]byte{byte('a' + i)}, 100+i))
	}
	put("ck/run/old.pt", []byte("restored"))

	const job = "pod-staging"
	_, err := s.sm().CreateTrainingJob(ctx, &sagemaker.CreateTrainingJobInput{
		TrainingJobName: aws.String(job),
		RoleArn:         aws.String("arn:aws:iam::000000000000:role/x"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{
			TrainingImage: aws.String("pytorch-training:1.13-cpu-py3"), TrainingInputMode: smtypes.TrainingInputModeFile,
		},
		HyperParameters: map[string]string{
			"sagemaker_program":          `"train.py"`,
			"sagemaker_submit_directory": `"s3://data/job/source/sourcedir.tar.gz"`,
			"epochs":                     "3",
		},
		InputDataConfig: []smtypes.Channel{
			{ChannelName: aws.String("train"), DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
				S3DataType: smtypes.S3DataTypeS3Prefix, S3Uri: aws.String("s3://data/ds/train"), S3DataDistributionType: smtypes.S3DataDistributionFullyReplicated}}},
			{ChannelName: aws.String("shards"), DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
				S3DataType: smtypes.S3DataTypeS3Prefix, S3Uri: aws.String("s3://data/ds/shards/"), S3DataDistributionType: smtypes.S3DataDistributionShardedByS3Key}}},
		},
		OutputDataConfig:  &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://data/out")},
		CheckpointConfig:  &smtypes.CheckpointConfig{S3Uri: aws.String("s3://data/ck/run")},
		ResourceConfig:    &smtypes.ResourceConfig{InstanceType: smtypes.TrainingInstanceTypeMlM5Large, InstanceCount: aws.Int32(2), VolumeSizeInGB: aws.Int32(1)},
		StoppingCondition: &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(120)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.waitJob(ctx, job); d.TrainingJobStatus != smtypes.TrainingJobStatusCompleted {
		t.Fatalf("job %s: %s", d.TrainingJobStatus, aws.ToString(d.FailureReason))
	}
	get := func(key string) []byte {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// stage: the pod's algo-2 against the server's algo-2 (before its
	// script ran: inputs, config and code only).
	serverTree := func(host string) string { return filepath.Join(s.dataDir, "jobs", job, host) }
	pod := filepath.Join(t.TempDir(), "opt", "ml")
	stdout, stderr, code := s.sagebox(ctx, "stage", "--endpoint-url", s.URL, "--job-name", job, "--host", "algo-2", "--root", pod)
	if code != 0 {
		t.Fatalf("stage exit %d: %s%s", code, stdout, stderr)
	}
	mustContain(t, "stage's notes", stderr,
		"sagebox: channel train: 2 files copied from s3://data/ds/train",
		"sagebox: channel shards: 2 files copied from s3://data/ds/shards/",
		"sagebox: restored 3 checkpoint files from s3://data/ck/run/ into "+filepath.Join(pod, "checkpoints"))
	want := treeFiles(t, serverTree("algo-2"))
	got := treeFiles(t, pod)
	// The server's job has run: its script wrote model/, output/ and a
	// checkpoint per host, which the server uploaded, so the pod restores
	// both hosts' checkpoints.
	if got["checkpoints/ck-algo-1"] != "ck" || got["checkpoints/ck-algo-2"] != "ck" {
		t.Errorf("pod did not restore the job's checkpoints: %s", fileNames(got))
	}
	for _, m := range []map[string]string{want, got} {
		for rel := range m {
			if strings.HasPrefix(rel, "model/") || strings.HasPrefix(rel, "output/") || strings.HasPrefix(rel, "checkpoints/ck-") {
				delete(m, rel)
			}
		}
	}
	if fileNames(got) != fileNames(want) {
		t.Fatalf("pod tree:    %s\nserver tree: %s", fileNames(got), fileNames(want))
	}
	for rel, body := range want {
		if got[rel] != body {
			t.Errorf("%s differs:\npod:    %q\nserver: %q", rel, got[rel], body)
		}
	}
	if got["input/data/shards/part-1"] == "" || got["input/data/shards/part-0"] != "" {
		t.Errorf("algo-2 did not get its ShardedByS3Key share: %s", fileNames(got))
	}

	// collect: both hosts' trees, described by a file as the AWS CLI
	// prints it (ISO timestamps), with another output path.
	d, err := s.sm().DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(job)})
	if err != nil {
		t.Fatal(err)
	}
	d.OutputDataConfig.S3OutputPath = aws.String("s3://data/pod-out/")
	d.CheckpointConfig.S3Uri = aws.String("s3://data/pod-ck")
	b, err := json.Marshal(d) // Go field names are the API's; times as RFC 3339
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(jobFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = s.sagebox(ctx, "collect", "--endpoint-url", s.URL, "--job", jobFile, "--root", serverTree("algo-1"), "--root", serverTree("algo-2"))
	if code != 0 {
		t.Fatalf("collect exit %d: %s%s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "s3://data/pod-out/"+job+"/output/model.tar.gz" {
		t.Errorf("collect printed %q", stdout)
	}
	for _, name := range []string{"model.tar.gz", "output.tar.gz"} {
		local, remote := get("out/"+job+"/output/"+name), get("pod-out/"+job+"/output/"+name)
		if !bytes.Equal(local, remote) || len(local) == 0 {
			t.Errorf("%s: collect uploaded %d bytes that differ from the server's %d", name, len(remote), len(local))
		}
	}
	for _, host := range []string{"algo-1", "algo-2"} {
		if string(get("pod-ck/ck-"+host)) != "ck" {
			t.Errorf("checkpoint of %s not collected", host)
		}
	}
	if string(get("pod-ck/old.pt")) != "restored" {
		t.Error("restored checkpoint not collected")
	}

	// A problem with the job's inputs is its FailureReason, exit 2.
	var bad map[string]any
	json.Unmarshal(b, &bad)
	bad["InputDataConfig"].([]any)[0].(map[string]any)["DataSource"].(map[string]any)["S3DataSource"].(map[string]any)["S3Uri"] = "s3://data/nothing/"
	b, _ = json.Marshal(bad)
	os.WriteFile(jobFile, b, 0o644)
	_, stderr, code = s.sagebox(ctx, "stage", "--endpoint-url", s.URL, "--job", jobFile, "--host", "algo-1", "--root", t.TempDir())
	if code != 2 || !strings.Contains(stderr, `sagebox: ClientError: No S3 objects found under S3 URL "s3://data/nothing/" given in input data source for channel "train".`) {
		t.Errorf("bad channel: exit %d, %s", code, stderr)
	}
	// S3's NoSuchKey and NoSuchBucket reach staging as such.
	for uri, want := range map[string]string{
		"s3://data/nope.tar.gz":  "sagebox: ClientError: sagemaker_submit_directory s3://data/nope.tar.gz does not exist",
		"s3://nobucket/x.tar.gz": "sagebox: ClientError: sagemaker_submit_directory s3://nobucket/x.tar.gz does not exist",
	} {
		json.Unmarshal(b, &bad)
		bad["InputDataConfig"] = nil
		bad["HyperParameters"].(map[string]any)["sagemaker_submit_directory"] = `"` + uri + `"`
		nb, _ := json.Marshal(bad)
		os.WriteFile(jobFile, nb, 0o644)
		_, stderr, code = s.sagebox(ctx, "stage", "--endpoint-url", s.URL, "--job", jobFile, "--host", "algo-1", "--root", t.TempDir())
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %s", uri, code, stderr)
		}
	}
}

// TestCollectSidecar runs `sagebox collect --checkpoints-every` as a pod's
// sidecar would: checkpoints appear in S3 while it runs, and SIGTERM makes
// it upload the artifacts and exit 0.
func TestCollectSidecar(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.s3()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(t.TempDir(), "job.json")
	writeFile(t, jobFile, `{"TrainingJobName": "side", "HyperParameters": {"sagemaker_program": "\"train.py\""},
		"OutputDataConfig": {"S3OutputPath": "s3://data/out"}, "CheckpointConfig": {"S3Uri": "s3://data/ck"},
		"CreationTime": "2026-12-03T10:00:00Z"}`)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "model", "m.txt"), "weights")
	writeFile(t, filepath.Join(root, "checkpoints", ".keep"), "")

	cmd := execCommand(ctx, binary, "collect", "--endpoint-url", s.URL, "--job", jobFile, "--root", root, "--checkpoints-every", "50ms")
	cmd.Env = s.awsEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	waitObject := func(key, want string) {
		t.Helper()
		for {
			o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(key)})
			if err == nil {
				b, _ := io.ReadAll(o.Body)
				o.Body.Close()
				if string(b) == want {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never became %q; collect's stderr:\n%s", key, want, errb.String())
			case <-exited:
				t.Fatalf("collect exited early (%v):\n%s", waitErr, errb.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	writeFile(t, filepath.Join(root, "checkpoints", "epoch.pt"), "one")
	waitObject("ck/epoch.pt", "one")
	writeFile(t, filepath.Join(root, "checkpoints", "epoch.pt"), "two!")
	waitObject("ck/epoch.pt", "two!")
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("out/side/output/model.tar.gz")}); err == nil {
		t.Error("model.tar.gz uploaded before the sidecar was told to stop")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if waitErr != nil {
		t.Fatalf("collect after SIGTERM: %v\n%s", waitErr, errb.String())
	}
	if strings.TrimSpace(out.String()) != "s3://data/out/side/output/model.tar.gz" {
		t.Errorf("printed %q", out.String())
	}
	o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("out/side/output/model.tar.gz")})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	dir := t.TempDir()
	if err := archive.Extract(ctx, o.Body, dir); err != nil {
		t.Fatal(err)
	}
	if got := treeFiles(t, dir); fileNames(got) != "m.txt" || got["m.txt"] != "weights" {
		t.Errorf("model.tar.gz holds %v", got)
	}
}
