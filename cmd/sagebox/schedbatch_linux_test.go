package main

import (
	"bytes"
	"log/slog"
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

	var logs bytes.Buffer
	tuning, err := tuningFromEnv(func(k string) string {
		return map[string]string{"SAGEBOX_SCHED_BATCH": "true", "GOMAXPROCS": "1"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	tuning.apply(slog.New(slog.NewTextHandler(&logs, nil)), 0)
	if !strings.Contains(logs.String(), "SCHED_BATCH") {
		t.Errorf("the change is not logged:\n%s", logs.String())
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
	// A process started afterwards (a worker) inherits the policy, from a
	// thread other than the idle one.
	done := make(chan struct{})
	go func() {
		defer close(done)
		child := exec.Command("sleep", "30")
		if err := child.Start(); err != nil {
			t.Error(err)
			return
		}
		defer func() { child.Process.Kill(); child.Wait() }()
		checkPolicy(t, "child "+strconv.Itoa(child.Process.Pid), child.Process.Pid, unix.SCHED_BATCH)
	}()
	<-done
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
