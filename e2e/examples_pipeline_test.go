package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The pipeline example end to end: its two models deployed as one serial
// CreateModel, invoked once; model 2 rejects, from the client's rows it
// reads through context.original_request, the blank and the out-of-range
// row model 1 answered anyway, and keeps model 1's labels for the others.
func TestExamplePipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import sklearn, boto3")
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	models := t.TempDir() // made by the first run, reused by the second
	for _, ct := range []string{"text/csv", "application/json"} {
		out := runPython(ctx, t, s.awsEnv(), "examples/pipeline/deploy_and_invoke.py", "--endpoint-url", s.URL,
			"--models", models, "--content-type", ct, "--min-accuracy", "0.9")
		mustContain(t, "pipeline output", out, "InService (classifier → postprocess)", "deleted endpoint, endpoint config and model digits-pipeline")
		i := strings.LastIndex(out, "summary: ")
		if i < 0 {
			t.Fatalf("no summary line:\n%s", out)
		}
		var sum struct {
			Rows, OK, Uncertain int
			Rejected            []struct {
				Row    int
				Reason string
			}
			AccuracyOK float64 `json:"accuracy_ok"`
		}
		line, _, _ := strings.Cut(out[i+len("summary: "):], "\n")
		if err := json.Unmarshal([]byte(line), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		if sum.Rows != 62 || sum.OK < 50 || sum.AccuracyOK < 0.9 || len(sum.Rejected) != 2 ||
			sum.Rejected[0].Row != 60 || !strings.HasPrefix(sum.Rejected[0].Reason, "blank") ||
			sum.Rejected[1].Row != 61 || !strings.HasPrefix(sum.Rejected[1].Reason, "out of range: pixel values span [0, 16]") {
			t.Errorf("%s: summary %+v\n%s", ct, sum, out)
		}
	}
	s.checkNoHosting(ctx, t)
}
