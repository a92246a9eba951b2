package modelserver

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBatchScheduling runs TestBatchSchedulingHelper in a process of its
// own, under nice 5: the scheduling policy is process-wide, and the other
// tests should not run under it.
func TestBatchScheduling(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	cmd := exec.Command("nice", "-n", "5", os.Args[0], "-test.run=^TestBatchSchedulingHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "SAGEBOX_SCHED_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBatchSchedulingHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func TestBatchSchedulingHelper(t *testing.T) {
	if os.Getenv("SAGEBOX_SCHED_HELPER") != "1" {
		t.Skip("run by TestBatchScheduling")
	}
	// A thread someone put under another policy keeps it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	idle := unix.Gettid()
	attr, err := unix.SchedGetAttr(idle, 0)
	if err != nil {
		t.Fatal(err)
	}
	attr.Policy = unix.SCHED_IDLE
	if err := unix.SchedSetAttr(idle, attr, 0); err != nil {
		t.Fatal(err)
	}

	ts := startTestServer(t, testOptions{mutate: func(c *Config) { c.BatchScheduling = true }})
	if r := ts.invoke(t, "hello"); r.code != 200 {
		t.Fatalf("invoke: %d %s", r.code, r.body)
	}
	if !strings.Contains(ts.logText(), "SCHED_BATCH") {
		t.Errorf("the change is not logged:\n%s", ts.logText())
	}

	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		want := uint32(unix.SCHED_BATCH)
		if tid == idle {
			want = unix.SCHED_IDLE
		}
		checkPolicy(t, "thread "+task.Name(), tid, want)
	}
	loads := ts.loads(t)
	if len(loads) == 0 {
		t.Fatal("no worker loaded")
	}
	for _, l := range loads {
		checkPolicy(t, "worker "+strconv.Itoa(l.PID), l.PID, unix.SCHED_BATCH)
	}
}

// checkPolicy checks a thread's policy, and that its nice value is still
// the 5 that TestBatchScheduling started the process with.
func checkPolicy(t *testing.T, what string, tid int, want uint32) {
	t.Helper()
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if attr.Policy != want || (want == unix.SCHED_BATCH && attr.Nice != 5) {
		t.Errorf("%s: policy %d nice %d, want policy %d nice 5", what, attr.Policy, attr.Nice, want)
	}
}
