package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// tarEntries downloads an s3:// tar.gz and returns its entries' contents.
func tarEntries(t *testing.T, s *server, uri string) map[string]string {
	t.Helper()
	rest := strings.TrimPrefix(uri, "s3://")
	bucket, key, _ := strings.Cut(rest, "/")
	obj, err := s.s3().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", uri, err)
	}
	defer obj.Body.Close()
	zr, err := gzip.NewReader(obj.Body)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", uri, err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimPrefix(h.Name, "./")] = string(b)
	}
}

func prepareDigits(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	out, err := exec.Command("/usr/bin/python3", filepath.Join(repoRoot(t), "examples/digits/prepare_data.py"), dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot prepare digits data (python3-sklearn missing?): %v\n%s", err, out)
	}
	return dir
}

// The README's main job: the sagebox CLI trains the bundled digits example.
func TestCLITrainsDigits(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import sklearn")
	s := startServer(t)
	data := prepareDigits(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, errOut, code := s.sagebox(ctx, "train", "examples/digits/train.py", "--name", "digits-cli",
		"--data", "training="+data, "-p", "epochs=3", "-p", "lr=0.05",
		"--metric", "test:accuracy=test_accuracy=([0-9.]+)", "--json")
	if code != 0 {
		t.Fatalf("sagebox train exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "train stdout", out, "epoch=3 loss=", "saved model to")
	mustContain(t, "train stderr", errOut, "Training", "Model artifacts: s3://sagebox-default/digits-cli/output/model.tar.gz")
	d := s.waitJob(ctx, "digits-cli")
	if len(d.FinalMetricDataList) == 0 || aws.ToString(d.FinalMetricDataList[0].MetricName) != "test:accuracy" {
		t.Errorf("FinalMetricDataList = %+v, want test:accuracy", d.FinalMetricDataList)
	}
	files := tarEntries(t, s, aws.ToString(d.ModelArtifacts.S3ModelArtifacts))
	for _, f := range []string{"model.pth", "model.pt", "metrics.json"} {
		if _, ok := files[f]; !ok {
			t.Errorf("model.tar.gz lacks %s (has %v)", f, keys(files))
		}
	}
	// jobs ls/describe are readable for humans and machines.
	ls, _, code := s.sagebox(ctx, "jobs", "ls")
	if code != 0 || !strings.Contains(ls, "digits-cli") || !strings.Contains(ls, "Completed") {
		t.Errorf("jobs ls (exit %d):\n%s", code, ls)
	}
	js, _, code := s.sagebox(ctx, "jobs", "describe", "digits-cli", "--json")
	var desc map[string]any
	if code != 0 || json.Unmarshal([]byte(js), &desc) != nil || desc["TrainingJobStatus"] != "Completed" {
		t.Errorf("jobs describe --json (exit %d):\n%s", code, js)
	}
	logs, _, code := s.sagebox(ctx, "jobs", "logs", "digits-cli")
	if code != 0 || !strings.Contains(logs, "epoch=1 loss=") {
		t.Errorf("jobs logs (exit %d):\n%s", code, logs)
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// A failing script fails the CLI with exit 2 and the exception in the reason.
func TestCLIFailingJob(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), "import sys\nprint('starting')\nraise ValueError('learning rate must be positive, got -1')\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "fails")
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "stderr", errOut, "ValueError", "learning rate must be positive")
	d := s.waitJob(ctx, "fails")
	mustContain(t, "FailureReason", aws.ToString(d.FailureReason), "AlgorithmError", "ValueError: learning rate must be positive, got -1")
	if d.ModelArtifacts == nil {
		t.Errorf("a failed job still uploads model.tar.gz; ModelArtifacts is nil")
	}
	// A missing entry point is a clear CLI error before anything is submitted.
	_, errOut, code = s.sagebox(ctx, "train", filepath.Join(dir, "nope.py"))
	if code == 0 || !strings.Contains(errOut, "nope.py") {
		t.Errorf("missing entry point: exit %d, stderr %s", code, errOut)
	}
}

// StopTrainingJob reaches the script as SIGTERM; what it saves is uploaded.
func TestStopDeliversSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), `
import os, signal, sys, time
def on_term(sig, frame):
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "checkpoint.txt"), "w") as f:
        f.write("saved on SIGTERM")
    print("got SIGTERM, saved checkpoint", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(600)
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "stopme", "--no-wait")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	waitForLog(t, s, ctx, "stopme", "ready")
	if _, errOut, code := s.sagebox(ctx, "jobs", "stop", "stopme"); code != 0 {
		t.Fatalf("jobs stop: exit %d: %s", code, errOut)
	}
	d := s.waitJob(ctx, "stopme")
	if d.TrainingJobStatus != "Stopped" {
		t.Fatalf("status %s/%s, want Stopped", d.TrainingJobStatus, d.SecondaryStatus)
	}
	files := tarEntries(t, s, aws.ToString(d.ModelArtifacts.S3ModelArtifacts))
	if files["checkpoint.txt"] != "saved on SIGTERM" {
		t.Errorf("model.tar.gz = %v, want the checkpoint the SIGTERM handler wrote", keys(files))
	}
	// Stopping a job that has ended is a ValidationException.
	_, errOut, code = s.sagebox(ctx, "jobs", "stop", "stopme")
	if code == 0 || !strings.Contains(errOut, "ValidationException") {
		t.Errorf("second stop: exit %d, stderr %s", code, errOut)
	}
}

// waitForLog waits until a job's logs contain want.
func waitForLog(t *testing.T, s *server, ctx context.Context, job, want string) string {
	t.Helper()
	for {
		out, _, _ := s.sagebox(ctx, "jobs", "logs", job)
		if strings.Contains(out, want) {
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s never logged %q; logs so far:\n%s", job, want, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
