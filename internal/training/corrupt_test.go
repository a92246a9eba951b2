package training

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// TestRecoverCorruptOrForeignState: after a restart, a host whose state is
// corrupt, or names a pid that now belongs to another program, is never
// signalled, and the job fails with a reason that says so.
func TestRecoverCorruptOrForeignState(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	running := func(name string) string {
		hps := e.putSource(name, map[string]string{"train.py": ""})
		e.mem.put(t, newTestJob(name, hps, func(j *sagebox.TrainingJob) {
			_ = j.Advance(sagebox.SecondaryTraining, msgTraining, time.Now())
			j.TrainingStartTime = sagebox.NewTime(time.Now())
		}))
		state := filepath.Join(e.dataDir, "jobs", name, ".sagebox", "algo-1")
		if err := os.MkdirAll(state, 0o755); err != nil {
			t.Fatal(err)
		}
		return state
	}
	// Garbage where the launch intent should be.
	state := running("corrupt")
	os.WriteFile(filepath.Join(state, "shim.json"), []byte(`{"argv":["python","train.py"]}`), 0o644)
	os.WriteFile(filepath.Join(state, "proc.json"), []byte("{not json"), 0o644)
	// A legacy record naming the pid of a live program that is not ours.
	other := exec.Command("/bin/sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	writeLegacyLaunch(t, running("foreign"), other.Process.Pid)

	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "corrupt", 30*time.Second)
	if j.TrainingJobStatus != sagebox.StatusFailed ||
		!strings.HasPrefix(j.FailureReason, "InternalServerError: sagebox server restarted and the state of the job's process on algo-1 could not be re-adopted: ") {
		t.Errorf("corrupt: %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	j = e.mem.waitEnd(t, "foreign", 30*time.Second)
	if j.TrainingJobStatus != sagebox.StatusFailed || !strings.Contains(j.FailureReason, "was gone without an exit status") {
		t.Errorf("foreign: %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the program whose pid the state named was signalled: %v", err)
	}
	if st, _ := os.ReadFile("/proc/" + strconv.Itoa(other.Process.Pid) + "/stat"); !strings.Contains(string(st), ") S") {
		t.Errorf("the other program is not sleeping any more: %s", st)
	}
}
