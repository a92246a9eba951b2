package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// `make demo` end to end (scripts/demo.sh against a test server): the
// digits example is trained as a job, deployed from the job's artifacts by
// examples/digits/deploy_and_invoke.py, invoked with the held-out rows,
// its accuracy printed, and the endpoint, config and model deleted.
func TestExampleDigitsDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import sklearn, boto3")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/demo.sh")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(s.awsEnv(), "BIN="+binary)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	mustContain(t, "demo output", out, "Model artifacts: s3://sagebox-default/digits-", "InService after",
		"deleted endpoint, endpoint config and model digits-")
	m := regexp.MustCompile(`accuracy: ([0-9.]+) \(([0-9]+) of 360 held-out digits\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no accuracy line in the demo's output:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.9 {
		t.Errorf("accuracy %v, want at least 0.9:\n%s", acc, out)
	}
	s.checkNoHosting(ctx, t)
}
