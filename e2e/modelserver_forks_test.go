package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// forkingInference's model_fn leaves two processes behind, as handlers
// that start helpers do: a plain child (same process group) and a daemon
// that called setsid() (a session of its own). Each records its pid in
// $FORK_MARKS.
const forkingInference = `import os, time

def _mark(kind):
    open(os.path.join(os.environ["FORK_MARKS"], "%s-%d" % (kind, os.getpid())), "w").close()

def model_fn(model_dir):
    if os.fork() == 0:
        _mark("child")
        time.sleep(600)
        os._exit(0)
    if os.fork() == 0:
        os.setsid()
        _mark("daemon")
        time.sleep(600)
        os._exit(0)
    return None
`

// forkWorkers is the pool size of the fork tests: each worker leaves a
// child and a daemon.
const forkWorkers = 2

type forkedProc struct {
	kind  string
	pid   int
	start string // field 22 of /proc/PID/stat: a reused pid is another process
}

// alive reports whether the process is still running (not a zombie).
func (p forkedProc) alive() bool {
	state, start := procStateStart(p.pid)
	return start == p.start && state != "Z" && state != ""
}

// procStateStart is pid's state and start time from /proc/PID/stat.
func procStateStart(pid int) (state, start string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", ""
	}
	return f[0], f[19]
}

// startForkingServer starts a model server whose model_fn forks, with
// $TMPDIR of its own, and waits for every worker's forks.
func startForkingServer(t *testing.T, tmp string) (*modelServer, []forkedProc) {
	t.Helper()
	requireTorch(t)
	model, marks := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(model, "code", "inference.py"), forkingInference)
	ms := startModelServer(t, []string{
		"SAGEMAKER_MODEL_SERVER_WORKERS=" + strconv.Itoa(forkWorkers), "FORK_MARKS=" + marks, "TMPDIR=" + tmp,
	}, "--model-dir", model)
	var procs []forkedProc
	deadline := time.Now().Add(30 * time.Second)
	for len(procs) < 2*forkWorkers {
		if time.Now().After(deadline) {
			t.Fatalf("the handlers' forks did not all start: %v", procs)
		}
		time.Sleep(50 * time.Millisecond)
		ents, _ := os.ReadDir(marks)
		procs = procs[:0]
		for _, e := range ents {
			kind, p, _ := strings.Cut(e.Name(), "-")
			pid, _ := strconv.Atoi(p)
			_, start := procStateStart(pid)
			procs = append(procs, forkedProc{kind: kind, pid: pid, start: start})
		}
	}
	t.Cleanup(func() {
		for _, p := range procs {
			if p.alive() {
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	return ms, procs
}

// shortTempDir is a new directory with a short path: socket paths in it
// must stay under 108 bytes, and t.TempDir's are long.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ms-forks-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// sockDirs lists the model servers' socket directories in tmp.
func sockDirs(tmp string) []string {
	m, _ := filepath.Glob(filepath.Join(tmp, "sagebox-ms-*"))
	return m
}

// waitGone waits up to d for every process in procs and every process of ms
// to be gone, and reports the ones still alive.
func waitGone(ms *modelServer, procs []forkedProc, d time.Duration) (left []string) {
	deadline := time.Now().Add(d)
	for {
		left = left[:0]
		for _, p := range procs {
			if p.alive() {
				left = append(left, p.kind+" "+strconv.Itoa(p.pid))
			}
		}
		for _, pid := range processesWithEnv(ms.cacheEnv) {
			if state, _ := procStateStart(pid); state != "Z" && state != "" {
				left = append(left, "process "+strconv.Itoa(pid)+" of the server")
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Reliability probe R9: what a handler forks, setsid() daemons included,
// does not outlive the model server, whether it shuts down cleanly
// (SIGTERM) or is SIGKILLed; nor does its temporary directory.
func TestModelServerHandlerForksDieWithIt(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Run("SIGTERM", func(t *testing.T) {
		tmp := shortTempDir(t)
		ms, procs := startForkingServer(t, tmp)
		ms.cmd.Process.Signal(syscall.SIGTERM)
		ms.waitExit(t)
		if left := waitGone(ms, procs, 0); len(left) > 0 {
			t.Errorf("after the model server exited, still running: %v", left)
		}
		if d := sockDirs(tmp); len(d) > 0 {
			t.Errorf("temporary directories left: %v", d)
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		tmp := shortTempDir(t)
		ms, procs := startForkingServer(t, tmp)
		if len(sockDirs(tmp)) != 1 {
			t.Fatalf("socket directories %v, want one", sockDirs(tmp))
		}
		ms.cmd.Process.Kill()
		<-ms.exited
		if left := waitGone(ms, procs, 5*time.Second); len(left) > 0 {
			t.Errorf("5 s after the model server was SIGKILLed, still running: %v", left)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(sockDirs(tmp)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if d := sockDirs(tmp); len(d) > 0 {
			t.Errorf("temporary directories left 5 s after the SIGKILL: %v", d)
		}
	})
	// Everything killed at once (the front end, the supervisors and the
	// workers: an OOM kill of the whole cgroup, say): nobody is left to
	// remove the socket directory; the next model server's start does.
	t.Run("next start sweeps", func(t *testing.T) {
		tmp := shortTempDir(t)
		ms, procs := startForkingServer(t, tmp)
		left := sockDirs(tmp)
		if len(left) != 1 {
			t.Fatalf("socket directories %v, want one", left)
		}
		pids := append(processesWithEnv(ms.cacheEnv), ms.cmd.Process.Pid)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGSTOP) // none may react to another's death
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-ms.exited
		waitGone(ms, procs, 5*time.Second)
		if d := sockDirs(tmp); len(d) != 1 {
			t.Fatalf("with everything killed at once the directory went anyway (%v): this test tests nothing", d)
		}
		ms2, _ := startForkingServer(t, tmp)
		if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
			t.Errorf("the next start left the dead server's %s (%v)", left[0], err)
		}
		ms2.cmd.Process.Signal(syscall.SIGTERM)
		ms2.waitExit(t)
	})
}
