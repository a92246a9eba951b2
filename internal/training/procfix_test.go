package training

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// sigtermTwiceScript counts the SIGTERMs it gets; the first one runs a
// handler that takes a while (the checkpoint-on-stop pattern).
const sigtermTwiceScript = `import signal, sys, time
n = [0]
def h(*a):
    n[0] += 1
    print("SIGTERM", n[0], flush=True)
    if n[0] == 1:
        time.sleep(2)
        print("checkpoint saved", flush=True)
        sys.exit(0)
signal.signal(signal.SIGTERM, h)
print("training", flush=True)
time.sleep(120)
`

// TestRecoverDuringStopDoesNotResendSIGTERM is reproduction R10 of the
// 12-03 reliability probe: the server goes away while a job is Stopping
// and the script is inside its SIGTERM handler; the new server must not
// send it a second SIGTERM, only keep the SIGKILL deadline.
func TestRecoverDuringStopDoesNotResendSIGTERM(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("stop-twice", map[string]string{"train.py": sigtermTwiceScript})
	e.submit(newTestJob("stop-twice", hps))
	waitLog(t, e, "stop-twice/", "training", 30*time.Second)
	e.mem.update(t, "stop-twice", func(j *sagebox.TrainingJob) { // StopTrainingJob
		if err := j.RequestStop(sagebox.SecondaryStopped, sagebox.MsgStopping, time.Now()); err != nil {
			t.Error(err)
		}
	})
	if err := e.runner.Stop(context.Background(), "stop-twice"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, e, "stop-twice/", "SIGTERM 1", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "stop-twice", 60*time.Second)
	logs := e.logs.text("stop-twice/")
	if j.TrainingJobStatus != sagebox.StatusStopped {
		t.Errorf("status %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	if strings.Contains(logs, "SIGTERM 2") || !strings.Contains(logs, "checkpoint saved") {
		t.Errorf("the script got SIGTERM again after the restart, or its handler did not finish; logs:\n%s", logs)
	}
}

// launchRaceScript records each run of itself in RUNS.
const launchRaceScript = `import os, time
open(%q, "a").write("start %%d\n" %% os.getpid())
for i in range(30):
    print("line", i, flush=True)
    time.sleep(0.03)
open(%q, "a").write("end %%d\n" %% os.getpid())
`

// TestCrashInLaunchWindowRunsOnce is reproduction R2 of the 12-03
// reliability probe: the server is SIGKILLed right after a host's process
// supervisor started (before the old runner recorded its pid). The
// restarted server must re-adopt that process, not stage and run the
// script a second time beside the orphan, and the job ends on the one
// run's exit.
func TestCrashInLaunchWindowRunsOnce(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.txt")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashInLaunchWindowHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "SAGEBOX_LAUNCH_CRASH_DIR="+dir, "SAGEBOX_LAUNCH_CRASH_RUNS="+runs)
	out, _ := cmd.CombinedOutput()
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was not killed in the launch window: %v\n%s", cmd.ProcessState, out)
	}
	e := newEnvAt(t, dir)
	loadJobs(t, e.mem, filepath.Join(dir, "jobs.json"))
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "race", 60*time.Second)
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Errorf("status %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	var lines []string
	for _, l := range e.logs.lines("race/") {
		if strings.HasPrefix(l, "line ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 30 {
		t.Errorf("%d of 30 lines logged: %v", len(lines), lines)
	}
	// A second run, if any, would still be going: give it time to show.
	time.Sleep(300 * time.Millisecond)
	b, _ := os.ReadFile(runs)
	if got := strings.Fields(string(b)); len(got) != 4 || got[0] != "start" || got[2] != "end" || got[1] != got[3] {
		t.Errorf("the script should have run exactly once; runs.txt:\n%s", b)
	}
}

// TestCrashInLaunchWindowHelper is the server of
// TestCrashInLaunchWindowRunsOnce: its clock SIGKILLs it the first time it
// is read while a supervisor for the job exists.
func TestCrashInLaunchWindowHelper(t *testing.T) {
	dir := os.Getenv("SAGEBOX_LAUNCH_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestCrashInLaunchWindowRunsOnce")
	}
	runs := os.Getenv("SAGEBOX_LAUNCH_CRASH_RUNS")
	state := filepath.Join(dir, "jobs", "race", ".sagebox", "algo-1")
	e := newEnvAt(t, dir, func(c *testConfig) {
		c.Now = func() time.Time {
			if supervisorRunning(state) {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return time.Now()
		}
	})
	e.mem.persist = filepath.Join(dir, "jobs.json")
	hps := e.putSource("race", map[string]string{"train.py": fmt.Sprintf(launchRaceScript, runs, runs)})
	e.submit(newTestJob("race", hps))
	time.Sleep(60 * time.Second)
	t.Fatal("never killed")
}

// supervisorRunning reports whether a live process's command line names
// state and exec-shim.
func supervisorRunning(state string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "exec-shim") && slices.Contains(args, state) {
			return true
		}
	}
	return false
}

func loadJobs(t *testing.T, m *memJobs, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := json.Unmarshal(b, &m.jobs); err != nil {
		t.Fatal(err)
	}
}
