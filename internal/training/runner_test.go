package training

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/proc"
)

// End-to-end tests: a real Runner, the real object store, the real shim
// (this test binary), real Python and torch processes; only the job store
// and the log sink are in-memory fakes.

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
}

const mlpScript = `import argparse, json, os, torch
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--model-dir", default=os.environ["SM_MODEL_DIR"])
a, _ = p.parse_known_args()
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "part-0.csv")).read().split()
torch.manual_seed(0)
x = torch.tensor([[float(v) for v in r.split(",")] for r in rows])
y = x.sum(1, keepdim=True)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
for step in range(a.epochs):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss={loss.item():.6f};")
torch.save(model.state_dict(), os.path.join(a.model_dir, "model.pth"))
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "result.json"), "w") as f:
    json.dump({"loss": loss.item()}, f)
assert os.environ["SM_CURRENT_HOST"] == "algo-1", os.environ["SM_CURRENT_HOST"]
assert os.getcwd() == os.path.join(os.environ["SAGEMAKER_BASE_DIR"], "code")
print("hp", os.environ["SM_HP_EPOCHS"], os.environ["SM_CHANNELS"], os.environ["TRAINING_JOB_NAME"])
`

func TestJobTrainsTorchMLP(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	t.Parallel()
	e := newEnv(t)
	var rows []string
	for i := range 32 {
		rows = append(rows, fmt.Sprintf("%d,%d,%d,%d", i%3, i%5, i%7, i%2))
	}
	e.putObject("data/train/part-0.csv", []byte(strings.Join(rows, "\n")))
	hps := e.putSource("mlp", map[string]string{"train.py": mlpScript})
	hps["epochs"], hps["lr"] = "5", "0.05"
	job := newTestJob("mlp", hps, withChannel("train", "s3://bkt/data/train", "FullyReplicated"), func(j *sagebox.TrainingJob) {
		j.AlgorithmSpecification.MetricDefinitions = []sagebox.MetricDefinition{{Name: "train:loss", Regex: `loss=(\S+);`}}
	})
	e.submit(job)
	j := e.mem.waitEnd(t, "mlp", 120*time.Second)
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s/%s: %s\nlogs:\n%s", j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason, e.logs.text("mlp/"))
	}
	if got := transitionsString(j); got != "Starting → Downloading → Training → Uploading → Completed" {
		t.Errorf("transitions %s", got)
	}
	for i, tr := range j.SecondaryStatusTransitions {
		if tr.StatusMessage == "" || tr.StartTime == nil || tr.EndTime == nil {
			t.Errorf("transition %d incomplete: %+v", i, tr)
		}
	}
	if j.TrainingStartTime == nil || j.TrainingEndTime == nil || j.TrainingTimeInSeconds == nil || *j.BillableTimeInSeconds != *j.TrainingTimeInSeconds {
		t.Errorf("times: start %v end %v training %v billable %v", j.TrainingStartTime, j.TrainingEndTime, j.TrainingTimeInSeconds, j.BillableTimeInSeconds)
	}
	if j.ModelArtifacts == nil || j.ModelArtifacts.S3ModelArtifacts != "s3://bkt/output/mlp/output/model.tar.gz" {
		t.Errorf("ModelArtifacts = %+v", j.ModelArtifacts)
	}
	if files := e.extractObject("output/mlp/output/model.tar.gz"); len(files["model.pth"]) < 100 {
		t.Errorf("model.tar.gz = %v", keys(files))
	}
	if files := e.extractObject("output/mlp/output/output.tar.gz"); !strings.Contains(files["result.json"], "loss") {
		t.Errorf("output.tar.gz = %v", files)
	}
	logs := e.logs.text("mlp/")
	if !strings.Contains(logs, "hp 5 [\"train\"] mlp") || !strings.Contains(logs, "step 4 loss=") {
		t.Errorf("logs:\n%s", logs)
	}
	if len(e.logs.streams) != 1 {
		t.Errorf("streams %v", e.logs.streams)
	}
	for s := range e.logs.streams {
		if !regexp.MustCompile(`^mlp/algo-1-\d{10}$`).MatchString(s) {
			t.Errorf("stream name %q", s)
		}
	}
	e.mem.mu.Lock()
	points := len(e.mem.metrics["mlp"])
	e.mem.mu.Unlock()
	if points != 5 {
		t.Errorf("%d metric points, want 5", points)
	}
	if len(j.FinalMetricDataList) != 1 || j.FinalMetricDataList[0].MetricName != "train:loss" || j.FinalMetricDataList[0].Value <= 0 {
		t.Errorf("FinalMetricDataList = %+v", j.FinalMetricDataList)
	}
	if !exists(filepath.Join(e.dataDir, "jobs", "mlp", "algo-1", "output", "success")) {
		t.Error("output/success missing")
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTorchrunNeedsAPythonEntryPoint: torch_distributed with a shell
// script as entry point fails at launch, saying what torchrun needs.
func TestTorchrunNeedsAPythonEntryPoint(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("shrun", map[string]string{"run.sh": "echo hi\n"})
	hps["sagemaker_program"] = `"run.sh"`
	hps["sagemaker_torch_distributed_enabled"] = "true"
	e.submit(newTestJob("shrun", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "shrun", 60*time.Second)
	want := "ClientError: torch_distributed needs a Python script as entry point (a .py file, and no setup.py); got run.sh"
	if j.TrainingJobStatus != sagebox.StatusFailed || j.FailureReason != want {
		t.Fatalf("status %s reason %q", j.TrainingJobStatus, j.FailureReason)
	}
}

func TestJobFailures(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	e.putObject("data/train/x", []byte("x"))
	e.putObject("evil/sourcedir.tar.gz", tarGz(t, tarItem{name: "train.py", body: "print(1)"}, tarItem{name: "../escape.py", body: "x"}))
	tests := []struct {
		name   string
		files  map[string]string
		tweak  func(*sagebox.TrainingJob)
		reason string // prefix
		has    []string
		upload bool
	}{
		{
			name:   "exception",
			files:  map[string]string{"train.py": "import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'partial.txt'), 'w').write('p')\ndef main():\n    raise ValueError('bad learning rate')\nmain()\n"},
			reason: "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"Traceback (most recent call last):\n",
			has:    []string{"ValueError: bad learning rate\"\nCommand \"/usr/bin/python3 train.py\"", "in main\n    raise ValueError('bad learning rate')"},
			upload: true,
		},
		{
			name:   "own failure file",
			files:  map[string]string{"train.py": "import os, sys\nopen(os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure'), 'w').write('custom: dataset is empty')\nsys.exit(2)\n"},
			reason: "AlgorithmError: custom: dataset is empty",
			upload: true,
		},
		{
			name:   "killed by a signal",
			files:  map[string]string{"train.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"},
			reason: "AlgorithmError: ExecuteUserScriptError:\nExitCode 137\n",
			has:    []string{"ExtraInfo \"OutOfMemory: Process killed by SIGKILL (signal 9)\""},
			upload: true,
		},
		{
			name:   "missing entry point",
			files:  map[string]string{"other.py": "", "lib/x.py": ""},
			reason: "ClientError: entry point train.py not found in sourcedir (files: lib/x.py, other.py)",
		},
		{
			name:   "empty channel",
			files:  map[string]string{"train.py": ""},
			tweak:  withChannel("train", "s3://bkt/data/none/", "FullyReplicated"),
			reason: `ClientError: No S3 objects found under S3 URL "s3://bkt/data/none/"`,
		},
		{
			name:  "unsafe sourcedir",
			files: map[string]string{"train.py": ""},
			tweak: func(j *sagebox.TrainingJob) {
				j.HyperParameters["sagemaker_submit_directory"] = `"s3://bkt/evil/sourcedir.tar.gz"`
			},
			reason: `ClientError: sourcedir s3://bkt/evil/sourcedir.tar.gz was refused: unsafe path in archive: "../escape.py" climbs out with ..`,
		},
		{
			name:   "unknown distribution",
			files:  map[string]string{"train.py": ""},
			tweak:  func(j *sagebox.TrainingJob) { j.HyperParameters["sagemaker_parameter_server_enabled"] = "true" },
			reason: "ClientError: hyperparameter sagemaker_parameter_server_enabled asks for a distribution the PyTorch container does not have",
		},
		{
			name:   "mpi without mpirun",
			files:  map[string]string{"train.py": ""},
			tweak:  func(j *sagebox.TrainingJob) { j.HyperParameters["sagemaker_mpi_enabled"] = "true" },
			reason: "ClientError: distribution mpi runs the job with mpirun, which is not installed on this machine",
		},
		{
			name:  "pipe mode",
			files: map[string]string{"train.py": ""},
			tweak: func(j *sagebox.TrainingJob) {
				j.AlgorithmSpecification.TrainingInputMode = "Pipe"
				withChannel("train", "s3://bkt/data/train", "")(j)
			},
			reason: `ClientError: channel "train": Pipe input mode is not supported`,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "without mpirun") {
				if _, err := exec.LookPath("mpirun"); err == nil {
					t.Skip("mpirun is installed here")
				}
			}
			name := fmt.Sprintf("fail-%d", i)
			hps := e.putSource(name, tt.files)
			job := newTestJob(name, hps)
			if tt.tweak != nil {
				tt.tweak(job)
			}
			e.submit(job)
			j := e.mem.waitEnd(t, name, 60*time.Second)
			if j.TrainingJobStatus != sagebox.StatusFailed || j.SecondaryStatus != sagebox.SecondaryFailed {
				t.Fatalf("status %s/%s", j.TrainingJobStatus, j.SecondaryStatus)
			}
			if !strings.HasPrefix(j.FailureReason, tt.reason) {
				t.Errorf("FailureReason =\n%s\nwant prefix\n%s", j.FailureReason, tt.reason)
			}
			for _, h := range tt.has {
				if !strings.Contains(j.FailureReason, h) {
					t.Errorf("FailureReason lacks %q:\n%s", h, j.FailureReason)
				}
			}
			uploaded := j.ModelArtifacts != nil
			if uploaded != tt.upload {
				t.Errorf("ModelArtifacts = %+v, want uploaded=%v", j.ModelArtifacts, tt.upload)
			}
			if tt.upload && !strings.Contains(transitionsString(j), "Training → Uploading → Failed") {
				t.Errorf("transitions %s", transitionsString(j))
			}
			if !tt.upload && strings.Contains(transitionsString(j), "Training") {
				t.Errorf("transitions %s", transitionsString(j))
			}
		})
	}
	if exists(filepath.Join(e.dataDir, "jobs", "fail-5", "algo-1", "escape.py")) {
		t.Error("the unsafe archive wrote outside code/")
	}
	if b := e.extractObject("output/fail-0/output/model.tar.gz"); b["partial.txt"] != "p" {
		t.Errorf("model.tar.gz after a failure = %v", b)
	}
}

const stopScript = `import os, signal, sys, time, torch
ckpt = os.path.join(os.environ["SAGEMAKER_BASE_DIR"], "checkpoints")
def on_term(signum, frame):
    torch.save({"step": step}, os.path.join(ckpt, "last.pt"))
    open(os.path.join(os.environ["SM_MODEL_DIR"], "sigterm.txt"), "w").write("graceful")
    print("caught SIGTERM, checkpoint saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
step = 0
print("ready", flush=True)
while True:
    step += 1
    time.sleep(0.05)
`

func TestStopRunsSigtermHandler(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("stopme", map[string]string{"train.py": stopScript})
	job := newTestJob("stopme", hps, func(j *sagebox.TrainingJob) {
		j.CheckpointConfig = &sagebox.CheckpointConfig{S3Uri: "s3://bkt/ckpt/stopme"}
	})
	e.putObject("ckpt/stopme/previous.pt", []byte("from an earlier run"))
	e.submit(job)
	waitLog(t, e, "stopme/", "ready", 60*time.Second)
	if !exists(filepath.Join(e.dataDir, "jobs", "stopme", "algo-1", "checkpoints", "previous.pt")) {
		t.Error("checkpoint not restored before start")
	}
	e.mem.update(t, "stopme", func(j *sagebox.TrainingJob) { // StopTrainingJob
		if err := j.RequestStop(sagebox.SecondaryStopped, sagebox.MsgStopping, time.Now()); err != nil {
			t.Error(err)
		}
	})
	if err := e.runner.Stop(context.Background(), "stopme"); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "stopme", 60*time.Second)
	if j.TrainingJobStatus != sagebox.StatusStopped || j.SecondaryStatus != sagebox.SecondaryStopped || j.FailureReason != "" {
		t.Fatalf("status %s/%s %q", j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason)
	}
	if got := transitionsString(j); got != "Starting → Downloading → Training → Stopping → Uploading → Stopped" {
		t.Errorf("transitions %s", got)
	}
	if files := e.extractObject("output/stopme/output/model.tar.gz"); files["sigterm.txt"] != "graceful" {
		t.Errorf("model.tar.gz = %v", keys(files))
	}
	if b := e.getObject("ckpt/stopme/last.pt"); len(b) == 0 {
		t.Error("checkpoint written by the SIGTERM handler was not uploaded")
	}
	if !strings.Contains(e.logs.text("stopme/"), "caught SIGTERM, checkpoint saved") {
		t.Errorf("logs:\n%s", e.logs.text("stopme/"))
	}
}

func waitLog(t *testing.T, e *env, prefix, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(e.logs.text(prefix), text) {
		if time.Now().After(deadline) {
			t.Fatalf("log %q never showed %q; logs:\n%s", prefix, text, e.logs.text(prefix))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMaxRuntimeExceeded(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t, func(c *testConfig) { c.StopGrace = time.Second })
	script := "import os, time\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'model.txt'), 'w').write('early')\nprint('sleeping', flush=True)\ntime.sleep(60)\n"
	hps := e.putSource("slow", map[string]string{"train.py": script})
	e.submit(newTestJob("slow", hps, func(j *sagebox.TrainingJob) { j.StoppingCondition.MaxRuntimeInSeconds = 2 }))
	start := time.Now()
	j := e.mem.waitEnd(t, "slow", 60*time.Second)
	if j.TrainingJobStatus != sagebox.StatusStopped || j.SecondaryStatus != sagebox.SecondaryMaxRuntimeExceeded {
		t.Fatalf("status %s/%s %q", j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %v", el)
	}
	if got := transitionsString(j); got != "Starting → Downloading → Training → MaxRuntimeExceeded → Uploading → MaxRuntimeExceeded" {
		t.Errorf("transitions %s", got)
	}
	if files := e.extractObject("output/slow/output/model.tar.gz"); files["model.txt"] != "early" {
		t.Errorf("model.tar.gz = %v", files)
	}
}

func TestRequirements(t *testing.T) {
	skipShort(t)
	requirePython(t)
	if exec.Command(testPython, "-c", "import numpy, ensurepip").Run() != nil {
		t.Skip("numpy or venv support missing for " + testPython)
	}
	t.Setenv("PIP_RETRIES", "0")
	t.Setenv("PIP_TIMEOUT", "5")
	e := newEnv(t)
	tests := []struct {
		name, req string
		status    string
		reason    string
	}{
		{"already satisfied", "numpy\n", sagebox.StatusCompleted, ""},
		{"uninstallable", "sagebox-no-such-package-4f2a==0.0.1\n", sagebox.StatusFailed, "ClientError: InstallRequirementsError:\nExitCode 1\nErrorMessage \""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("req-%d", i)
			hps := e.putSource(name, map[string]string{"train.py": "import numpy, sys\nprint('numpy', numpy.__version__, sys.executable)\n", "requirements.txt": tt.req})
			e.submit(newTestJob(name, hps))
			j := e.mem.waitEnd(t, name, 300*time.Second)
			if j.TrainingJobStatus != tt.status || !strings.HasPrefix(j.FailureReason, tt.reason) {
				t.Fatalf("status %s reason %q\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, e.logs.text(name+"/"))
			}
			if tt.reason != "" && !strings.Contains(j.FailureReason, "sagebox-no-such-package-4f2a") {
				t.Errorf("reason lacks pip's message: %s", j.FailureReason)
			}
			if tt.status == sagebox.StatusCompleted && !strings.Contains(e.logs.text(name+"/"), "Requirement already satisfied: numpy") {
				t.Errorf("pip output missing from the log:\n%s", e.logs.text(name+"/"))
			}
		})
	}
}

const allReduceScript = `import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} on {os.environ['SM_CURRENT_HOST']} via {os.environ['MASTER_ADDR']}: sum {t.item()}", flush=True)
if dist.get_rank() == 0:
    torch.save(t, os.path.join(os.environ["SM_MODEL_DIR"], "sum.pt"))
dist.destroy_process_group()
`

func TestTorchDistributedTwoHosts(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("ddp", map[string]string{"train.py": allReduceScript})
	hps["sagemaker_torch_distributed_enabled"] = "true"
	hps["sagemaker_instance_type"] = `"ml.m5.large"`
	e.submit(newTestJob("ddp", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "ddp", 180*time.Second)
	logs := e.logs.text("ddp/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s: %s\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	via := "127.0.0.1"
	if proc.CheckIsolation() == nil {
		via = "algo-1" // torchrun's --master_addr, as on SageMaker
	}
	for _, want := range []string{"rank 0 of 2 on algo-1 via " + via + ": sum 3.0", "rank 1 of 2 on algo-2 via " + via + ": sum 3.0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if len(e.logs.streams) != 2 {
		t.Errorf("%d log streams, want 2", len(e.logs.streams))
	}
	if files := e.extractObject("output/ddp/output/model.tar.gz"); len(files["sum.pt"]) == 0 {
		t.Errorf("model.tar.gz = %v", keys(files))
	}
	if *j.BillableTimeInSeconds != 2**j.TrainingTimeInSeconds {
		t.Errorf("billable %d, training %d", *j.BillableTimeInSeconds, *j.TrainingTimeInSeconds)
	}
}

func TestMultiHostFailureFailsJob(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t, func(c *testConfig) { c.StopGrace = time.Second })
	script := "import os, sys, time\nif os.environ['SM_CURRENT_HOST'] == 'algo-2':\n    sys.exit('algo-2 gives up')\ntime.sleep(60)\n"
	hps := e.putSource("multi", map[string]string{"train.py": script})
	e.submit(newTestJob("multi", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "multi", 60*time.Second)
	if j.TrainingJobStatus != sagebox.StatusFailed || !strings.Contains(j.FailureReason, "algo-2 gives up") {
		t.Fatalf("status %s reason %q", j.TrainingJobStatus, j.FailureReason)
	}
}

const countScript = `import time
for i in range(1, 61):
    print(f"line {i}", flush=True)
    time.sleep(0.04)
`

// TestRecoverReadopts closes the runner while a job runs (the server goes
// away; the shim and the script do not), then starts a new runner whose
// Recover re-adopts the job: it completes, with every log line exactly
// once.
func TestRecoverReadopts(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("adopt", map[string]string{"train.py": countScript})
	e.submit(newTestJob("adopt", hps))
	waitLog(t, e, "adopt/", "line 10\n", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if j := e.mem.get(t, "adopt"); j.TrainingJobStatus != sagebox.StatusInProgress {
		t.Fatalf("closing the runner changed the job to %s", j.TrainingJobStatus)
	}
	time.Sleep(500 * time.Millisecond) // the script keeps printing meanwhile
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "adopt", 60*time.Second)
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	var got []string
	for _, l := range e.logs.lines("adopt/") {
		if strings.HasPrefix(l, "line ") {
			got = append(got, l)
		}
	}
	var want []string
	for i := 1; i <= 60; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("log lines after re-adoption (%d):\n%v", len(got), got)
	}
}

// TestRecoverStates covers the other cases of Recover, without processes.
func TestRecoverStates(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	// A job caught while downloading is staged again and runs.
	hps := e.putSource("was-downloading", map[string]string{"train.py": "print('ran after restart')\n"})
	e.mem.put(t, newTestJob("was-downloading", hps, func(j *sagebox.TrainingJob) {
		_ = j.Advance(sagebox.SecondaryDownloading, msgDownloading, time.Now())
		j.TrainingStartTime = sagebox.NewTime(time.Now())
	}))
	// A training job whose process vanished without an exit status.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	hps = e.putSource("was-training", map[string]string{"train.py": ""})
	e.mem.put(t, newTestJob("was-training", hps, func(j *sagebox.TrainingJob) {
		_ = j.Advance(sagebox.SecondaryTraining, msgTraining, time.Now())
		j.TrainingStartTime = sagebox.NewTime(time.Now())
	}))
	state := filepath.Join(e.dataDir, "jobs", "was-training", ".sagebox", "algo-1")
	os.MkdirAll(state, 0o755)
	writeLegacyLaunch(t, state, gone.Process.Pid)
	// A training job that finished while the server was down.
	hps = e.putSource("was-done", map[string]string{"train.py": ""})
	e.mem.put(t, newTestJob("was-done", hps, func(j *sagebox.TrainingJob) {
		_ = j.Advance(sagebox.SecondaryTraining, msgTraining, time.Now())
		j.TrainingStartTime = sagebox.NewTime(time.Now())
	}))
	state = filepath.Join(e.dataDir, "jobs", "was-done", ".sagebox", "algo-1")
	os.MkdirAll(state, 0o755)
	writeLegacyLaunch(t, state, gone.Process.Pid)
	os.WriteFile(filepath.Join(state, "output.log"), []byte("all done\n"), 0o644)
	os.WriteFile(filepath.Join(state, "exit.json"), []byte(`{"exit_code":0,"signal":""}`), 0o644)

	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j := e.mem.waitEnd(t, "was-downloading", 30*time.Second); j.TrainingJobStatus != sagebox.StatusCompleted || !strings.Contains(e.logs.text("was-downloading/"), "ran after restart") {
		t.Errorf("was-downloading: %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	j := e.mem.waitEnd(t, "was-training", 30*time.Second)
	want := fmt.Sprintf("InternalServerError: sagebox server restarted and the job's process (pid %d) was gone without an exit status", gone.Process.Pid)
	if j.TrainingJobStatus != sagebox.StatusFailed || j.FailureReason != want {
		t.Errorf("was-training: %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	if j := e.mem.waitEnd(t, "was-done", 30*time.Second); j.TrainingJobStatus != sagebox.StatusCompleted || j.ModelArtifacts == nil || !strings.Contains(e.logs.text("was-done/"), "all done") {
		t.Errorf("was-done: %s %q %+v", j.TrainingJobStatus, j.FailureReason, j.ModelArtifacts)
	}
}

func TestEntryPointTypes(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name  string
		entry string
		files map[string]string
		want  string
	}{
		{"shell script", "train.sh", map[string]string{"train.sh": "echo \"sh got: $*\"\n"}, "sh got: --epochs 3 --name a b"},
		{"command", "run", map[string]string{"run": "#!/bin/sh\necho \"cmd got $# args\"\n"}, "cmd got 4 args"},
		{"script in a subdirectory", "src/train.py", map[string]string{"src/train.py": "import sys\nprint('py got', sys.argv[1:])\n"}, "py got ['--epochs', '3', '--name', 'a b']"},
		{"package", "train.py", map[string]string{
			"setup.py":  "from setuptools import setup\nsetup(name='sbpkg', version='0.1', py_modules=['helper'])\n",
			"helper.py": "GREETING = 'from the installed package'\n",
			"train.py":  "import sys, helper\nprint(helper.GREETING, sys.argv[1:])\n",
		}, "from the installed package ['--epochs', '3', '--name', 'a b']"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("entry-%d", i)
			hps := e.putSource(name, tt.files)
			hps["sagemaker_program"] = `"` + tt.entry + `"`
			hps["epochs"], hps["name"] = "3", `"a b"`
			e.submit(newTestJob(name, hps))
			j := e.mem.waitEnd(t, name, 180*time.Second)
			logs := e.logs.text(name + "/")
			if j.TrainingJobStatus != sagebox.StatusCompleted || !strings.Contains(logs, tt.want) {
				t.Fatalf("status %s %q\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
			}
		})
	}
}

// TestStopBeforeRecover: StopTrainingJob reaches a runner that does not
// run the job yet (the server just restarted); the job still ends Stopped.
func TestStopBeforeRecover(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	hps := e.putSource("orphan", map[string]string{"train.py": ""})
	e.mem.put(t, newTestJob("orphan", hps, func(j *sagebox.TrainingJob) {
		_ = j.Advance(sagebox.SecondaryTraining, msgTraining, time.Now())
		j.TrainingStartTime = sagebox.NewTime(time.Now())
		_ = j.RequestStop(sagebox.SecondaryStopped, sagebox.MsgStopping, time.Now())
	}))
	state := filepath.Join(e.dataDir, "jobs", "orphan", ".sagebox", "algo-1")
	os.MkdirAll(state, 0o755)
	writeLegacyLaunch(t, state, gone.Process.Pid)
	if err := e.runner.Stop(context.Background(), "orphan"); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "orphan", 30*time.Second)
	if j.TrainingJobStatus != sagebox.StatusStopped || j.SecondaryStatus != sagebox.SecondaryStopped {
		t.Errorf("status %s/%s %q", j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason)
	}
}

func TestMPITwoHosts(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	if _, err := exec.LookPath("mpirun"); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("mpirun missing (SAGEBOX_STRICT_TOOLS=1)")
		}
		t.Skip("mpirun (Open MPI) not installed")
	}
	t.Parallel()
	e := newEnv(t)
	// Every rank runs on algo-1 (mpirun there starts them all) and finds
	// the master by MASTER_ADDR, as a torch script under mpirun does.
	script := `import os, socket, torch, torch.distributed as dist
rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
print(f"rank {rank} of {size} loss=0.{rank}; master {os.environ['MASTER_ADDR']} on {socket.gethostname()}", flush=True)
dist.init_process_group("gloo", rank=rank, world_size=size)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} sum {t.item()}", flush=True)
`
	hps := e.putSource("mpi", map[string]string{"train.py": script})
	hps["sagemaker_mpi_enabled"] = "true"
	hps["sagemaker_mpi_num_of_processes_per_host"] = "1"
	e.submit(newTestJob("mpi", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "mpi", 60*time.Second)
	logs := e.logs.text("mpi/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s %q\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	for _, want := range []string{"rank 0 of 2 loss=0.0;", "rank 1 of 2 loss=0.1;", "algo-2 is an MPI worker", "rank 0 sum 3.0", "rank 1 sum 3.0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if proc.CheckIsolation() == nil && !strings.Contains(logs, "master algo-1 on algo-1") {
		t.Errorf("the ranks do not see MASTER_ADDR=algo-1 on host algo-1:\n%s", logs)
	}
}

// writeLegacyLaunch writes the launch record an older binary left for a
// host whose supervisor had pid (shim.json, as the local driver reads it).
func writeLegacyLaunch(t *testing.T, state string, pid int) {
	t.Helper()
	b := fmt.Sprintf(`{"shim_pid":%d,"argv":["python","train.py"],"started_at":"2026-12-01T00:00:00Z"}`, pid)
	if err := os.WriteFile(filepath.Join(state, "shim.json"), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
}
