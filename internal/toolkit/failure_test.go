package toolkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

func TestErrorCaptureMessage(t *testing.T) {
	code := "/data/jobs/j/algo-1/code"
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{
			name: "user traceback",
			lines: []string{
				"epoch 1 loss 0.5",
				"Traceback (most recent call last):",
				`  File "` + code + `/train.py", line 12, in <module>`,
				"    main()",
				`  File "` + code + `/train.py", line 9, in main`,
				`    raise ValueError("learning rate must be positive")`,
				"ValueError: learning rate must be positive",
			},
			want: "Traceback (most recent call last):\n" +
				`  File "` + code + `/train.py", line 9, in main` + "\n" +
				`    raise ValueError("learning rate must be positive")` + "\n" +
				"ValueError: learning rate must be positive",
		},
		{
			name: "torchrun: the worker's traceback beats the launcher's",
			lines: []string{
				"[default0]:Traceback (most recent call last):",
				`[default0]:  File "` + code + `/train.py", line 3, in <module>`,
				"[default0]:    1/0",
				"[default0]:ZeroDivisionError: division by zero",
				"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)",
				"Traceback (most recent call last):",
				`  File "/usr/lib/python3/dist-packages/torch/distributed/run.py", line 762, in main`,
				"    run(args)",
				"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
			},
			want: "Traceback (most recent call last):\n  File \"" + code + "/train.py\", line 3, in <module>\n    1/0\nZeroDivisionError: division by zero",
		},
		{
			name:  "no traceback: toolkit-style error lines",
			lines: []string{"starting", "RuntimeError: CUDA out of memory", "more detail", "more detail"},
			want:  "RuntimeError: CUDA out of memory\nmore detail",
		},
		{
			name:  "nothing recognisable: the last lines",
			lines: []string{"1", "2", "3", "4", "5", "6", "bye"},
			want:  "3\n4\n5\n6\nbye",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c ErrorCapture
			for _, l := range tt.lines {
				c.Add(l, code)
			}
			if got := c.Message(code); got != tt.want {
				t.Errorf("message =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestExecuteUserScriptError(t *testing.T) {
	got := ExecuteUserScriptError(1, "", "ValueError: boom", []string{"/usr/bin/python3", "train.py", "--epochs", "1", "--name", "a b"})
	want := "ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"ValueError: boom\"\nCommand \"/usr/bin/python3 train.py --epochs 1 --name 'a b'\""
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	killed := ExecuteUserScriptError(137, "SIGKILL", "", []string{"python"})
	if !strings.Contains(killed, "ExitCode 137\nErrorMessage \"\"\nExtraInfo \"OutOfMemory: Process killed by SIGKILL (signal 9)\"\nCommand \"python\"") {
		t.Errorf("killed = %q", killed)
	}
}

func TestFailureFile(t *testing.T) {
	ws := Workspace{Root: t.TempDir()}
	if err := ws.Create(nil); err != nil {
		t.Fatal(err)
	}
	text, err := WriteFailureFile(ws, "generated")
	if err != nil || text != "generated" {
		t.Fatalf("first write = %q, %v", text, err)
	}
	os.WriteFile(ws.FailureFile(), []byte("the script's own words"), 0o644)
	if text, _ := WriteFailureFile(ws, "generated again"); text != "the script's own words" {
		t.Errorf("a failure file the script wrote must win, got %q", text)
	}
	// A symlink planted as output/failure is not followed: sagebox reads it
	// with more privileges than the script (run-as) has.
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root's secret"), 0o600)
	os.Remove(ws.FailureFile())
	if err := os.Symlink(secret, ws.FailureFile()); err != nil {
		t.Fatal(err)
	}
	if text, err := WriteFailureFile(ws, "generated"); text != "generated" || err != nil {
		t.Errorf("through a symlink: %q, %v; want sagebox's own text", text, err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root's secret" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	long := strings.Repeat("é", 2000)
	r := AlgorithmError(long)
	if !strings.HasPrefix(r, "AlgorithmError: é") || len([]rune(r)) != len("AlgorithmError: ")+1024 {
		t.Errorf("algorithmError keeps %d runes", len([]rune(r)))
	}
}

func TestInstallErrorFormat(t *testing.T) {
	err := &jobErrorStub{"install requirements.txt: exit status 1: Collecting nope\nERROR: No matching distribution found for nope"}
	got := InstallError("InstallRequirementsError", err, []string{"python", "-m", "pip", "install", "-r", "requirements.txt"})
	if !strings.HasPrefix(got, "ClientError: InstallRequirementsError:\nExitCode 1\nErrorMessage \"") ||
		!strings.Contains(got, "No matching distribution found for nope") ||
		!strings.HasSuffix(got, "Command \"python -m pip install -r requirements.txt\"") {
		t.Errorf("installError = %q", got)
	}
}

type jobErrorStub struct{ s string }

func (e *jobErrorStub) Error() string { return e.s }

func TestMetrics(t *testing.T) {
	m, bad := CompileMetrics([]sagebox.MetricDefinition{
		{Name: "train:loss", Regex: `loss=(.*?);`},
		{Name: "acc", Regex: `acc: (?P<v>[0-9.]+)\Z`},
		{Name: "whole", Regex: `[0-9]+ items`},
		{Name: "lookahead", Regex: `(?=x)`},
	})
	if len(bad) != 1 || !strings.Contains(bad[0], "lookahead") {
		t.Errorf("bad = %v", bad)
	}
	ts := time.UnixMilli(1700000000123)
	tests := []struct {
		line string
		want map[string]float64
	}{
		{"epoch 1 loss=0.25; acc: 0.9", map[string]float64{"train:loss": 0.25, "acc": 0.9}},
		{"loss=1e-3;", map[string]float64{"train:loss": 0.001}},
		{"loss=nan;", map[string]float64{}},
		{"loss=abc;", map[string]float64{}},
		{"acc: 0.5 trailing", map[string]float64{}},
		{"42 items", map[string]float64{}}, // "42 items" is not a float
	}
	for _, tt := range tests {
		got := map[string]float64{}
		for _, p := range m.Match(tt.line, ts) {
			got[p.Name] = p.Value
			if !p.Timestamp.Equal(ts) {
				t.Errorf("timestamp %v", p.Timestamp)
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%q: got %v, want %v", tt.line, got, tt.want)
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", tt.line, k, got[k], v)
			}
		}
	}
	fm := FinalMetricData([]map[string]FinalMetric{
		{"loss": {Value: 0.5, TimeMS: 10}, "acc": {Value: 0.1, TimeMS: 30}},
		{"loss": {Value: 0.4, TimeMS: 20}},
	})
	if len(fm) != 2 || fm[0].MetricName != "acc" || fm[1].MetricName != "loss" || fm[1].Value != 0.4 {
		t.Errorf("final metrics = %+v", fm)
	}
}
