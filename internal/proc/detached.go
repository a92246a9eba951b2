package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/statefile"
)

// Files in a detached process's state directory (see the package doc).
const (
	fileIntent     = "proc.json"
	fileSupervisor = "supervisor.json"
	fileChild      = "child.json"
	fileOutput     = "output.log"
	fileExit       = "exit.json"
	fileTerm       = "term.json"
	fileSupLog     = "shim.log"
)

// OutputPath is the file a detached process's stdout and stderr go to.
func OutputPath(stateDir string) string { return filepath.Join(stateDir, fileOutput) }

// SupervisorLogPath is the file the detached supervisor's own stderr goes to.
func SupervisorLogPath(stateDir string) string { return filepath.Join(stateDir, fileSupLog) }

func termPath(dir string) string { return filepath.Join(dir, fileTerm) }

// intentRecord is proc.json.
type intentRecord struct {
	Run       string    `json:"run"`
	Argv      []string  `json:"argv"`
	StartedAt time.Time `json:"started_at"`
}

// termRecord is term.json.
type termRecord struct {
	At  time.Time `json:"at"`
	Run string    `json:"run,omitempty"`
}

// pollEvery is how often a detached process is checked on.
const pollEvery = 50 * time.Millisecond

// adoptWait is how long Adopt waits for a supervisor that was started but
// has not recorded itself yet.
const adoptWait = 3 * time.Second

func startDetached(ctx context.Context, s Spec) (*Handle, error) {
	if s.StateDir == "" || len(s.Supervisor) == 0 {
		return nil, errors.New("start: a detached process needs StateDir and Supervisor")
	}
	if s.Sink != nil {
		return nil, errors.New("start: a detached process writes its output to OutputPath, not to a Sink")
	}
	if err := os.MkdirAll(s.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	run := newRunID()
	argv := append([]string{s.Path}, s.Args...)
	// The intent goes to disk before any process exists (see Adopt).
	if err := statefile.WriteJSON(filepath.Join(s.StateDir, fileIntent), intentRecord{Run: run, Argv: argv, StartedAt: time.Now()}); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	args := append(append([]string{}, s.Supervisor[1:]...), "--dir", s.StateDir, "--run", run)
	args = append(append(append(args, credentialArgs(s.Credential)...), isolationArgs(s)...), "--")
	cmd := exec.Command(s.Supervisor[0], append(args, argv...)...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	lg, err := os.OpenFile(SupervisorLogPath(s.StateDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer lg.Close()
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start supervisor %s: %w", s.Supervisor[0], err)
	}
	h := &Handle{detach: true, dir: s.StateDir, run: run, supPID: cmd.Process.Pid, done: make(chan struct{})}
	h.sup = identity{PID: cmd.Process.Pid, Start: startTime(cmd.Process.Pid)}
	// The supervisor is reaped here; it outlives this process if need be.
	go func() {
		_ = cmd.Wait()
		h.settle(false)
	}()
	return h, nil
}

// settle reads the exit of a supervisor that is gone and closes done.
func (h *Handle) settle(adopted bool) {
	var e exitRecord
	err := statefile.ReadJSON(filepath.Join(h.dir, fileExit), &e)
	switch {
	case err == nil && (e.Run == h.run || h.run == ""):
		h.res = Result{ExitCode: e.ExitCode, Signal: e.Signal, OOMKilled: e.OOMKilled && !h.killed.Load(),
			Killed: h.killed.Load(), StartedAt: e.StartedAt, EndedAt: e.EndedAt}
		if e.Error != "" {
			h.res.Err = errors.New(e.Error)
		}
	default:
		// Gone without an exit status (or only another run's): whatever is
		// left of the command's group is orphaned; kill it if it is still
		// the recorded one.
		if c := h.childRec(); c != nil && (identity{PID: c.PID, Start: c.Start}).alive() {
			_ = syscall.Kill(-c.PGID, syscall.SIGKILL)
		}
		why := "the process supervisor (pid %d) exited without an exit status"
		if adopted {
			why = "the process supervisor (pid %d) was gone without an exit status"
		}
		msg := fmt.Sprintf(why, h.supPID)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			msg += " (" + err.Error() + ")"
		}
		h.res = Result{ExitCode: 137, Signal: "SIGKILL", EndedAt: time.Now(), Err: fmt.Errorf("%w: %s", ErrLost, msg)}
	}
	close(h.done)
}

func (h *Handle) childRec() *childRecord {
	if c := h.child.Load(); c != nil {
		return c
	}
	if !h.detach {
		return nil
	}
	var c childRecord
	if statefile.ReadJSON(filepath.Join(h.dir, fileChild), &c) != nil || c.PID <= 0 {
		return nil
	}
	h.child.Store(&c)
	return &c
}

// signalDetached: SIGKILL goes straight to the command's group (it cannot
// be forwarded); anything else to the supervisor, which forwards it. Both
// only while the recorded identities still match.
func (h *Handle) signalDetached(sig syscall.Signal) error {
	supAlive := h.sup.alive()
	if sig == syscall.SIGKILL {
		if c := h.childRec(); c != nil && (supAlive || (identity{PID: c.PID, Start: c.Start}).alive()) {
			_ = syscall.Kill(-c.PGID, syscall.SIGKILL)
			return nil
		}
		if supAlive {
			_ = syscall.Kill(h.sup.PID, syscall.SIGKILL)
		}
		return nil
	}
	if supAlive {
		if err := syscall.Kill(h.sup.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %d: %w", h.sup.PID, err)
		}
	}
	return nil
}

// Adopt re-attaches to a detached process started from stateDir, by this
// or an earlier parent. It returns:
//   - a Handle whose Done is closed at once, when the process has ended
//     (its exit.json), or when it is gone without an exit status or its
//     pid now belongs to another program (Result.Err wraps ErrLost;
//     nothing is signalled);
//   - a Handle that watches the running process;
//   - ErrNotStarted when nothing ran from stateDir;
//   - an error wrapping ErrCorrupt when the state cannot be read.
//
// A supervisor that was started but has not recorded itself yet is waited
// for (up to 3 s): it records itself before it starts the command.
func Adopt(ctx context.Context, stateDir string) (*Handle, error) {
	var in intentRecord
	if err := statefile.ReadJSON(filepath.Join(stateDir, fileIntent), &in); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotStarted
		}
		return nil, fmt.Errorf("adopt %s: %w", stateDir, err)
	}
	if in.Run == "" {
		return nil, fmt.Errorf("adopt %s: %w: %s has no run id", stateDir, ErrCorrupt, fileIntent)
	}
	h := &Handle{detach: true, dir: stateDir, run: in.Run, adopted: true, done: make(chan struct{})}
	var tr termRecord
	if statefile.ReadJSON(termPath(stateDir), &tr) == nil && (tr.Run == in.Run || tr.Run == "") {
		h.termAt = tr.At
	}
	var e exitRecord
	if statefile.ReadJSON(filepath.Join(stateDir, fileExit), &e) == nil && e.Run == in.Run {
		h.settle(true)
		return h, nil
	}
	var rec supervisorRecord
	deadline := time.Now().Add(adoptWait)
	for {
		err := statefile.ReadJSON(filepath.Join(stateDir, fileSupervisor), &rec)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("adopt %s: %w", stateDir, err)
		}
		if time.Now().After(deadline) {
			// It never recorded itself, so it never started the command.
			// One still running (stuck before its first write) is killed,
			// so that a fresh start cannot run beside it.
			if pid := findSupervisor(stateDir, in.Run); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return nil, ErrNotStarted
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if rec.Run != in.Run || rec.PID <= 0 {
		return nil, fmt.Errorf("adopt %s: %w: %s is not the supervisor of run %s", stateDir, ErrCorrupt, fileSupervisor, in.Run)
	}
	h.sup, h.supPID = rec.identity, rec.PID
	go h.watch()
	return h, nil
}

// AdoptLegacy re-attaches to a process that an older binary started: its
// runner recorded only the supervisor's pid (supPID), its supervisor
// wrote child.json {pid,pgid} and exit.json without a run id. The
// supervisor counts as alive while /proc/<pid> is not a zombie and its
// command line names stateDir.
func AdoptLegacy(stateDir string, supPID int) *Handle {
	h := &Handle{detach: true, dir: stateDir, supPID: supPID, adopted: true, done: make(chan struct{})}
	var tr termRecord
	if statefile.ReadJSON(termPath(stateDir), &tr) == nil {
		h.termAt = tr.At
	}
	if st, err := readStat(supPID); err == nil && st.state != 'Z' && cmdlineHas(supPID, stateDir) {
		h.sup = identity{PID: supPID, Start: st.start}
		go h.watch()
		return h
	}
	h.settle(true)
	return h
}

// watch polls an adopted supervisor until it is gone.
func (h *Handle) watch() {
	for h.sup.alive() {
		time.Sleep(pollEvery)
	}
	h.settle(true)
}

func cmdlineHas(pid int, arg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, a := range strings.Split(string(b), "\x00") {
		if a == arg {
			return true
		}
	}
	return false
}

// findSupervisor finds a live supervisor of run in stateDir by its
// command line.
func findSupervisor(stateDir, run string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if cmdlineHas(pid, stateDir) && cmdlineHas(pid, run) {
			return pid
		}
	}
	return 0
}

// tailFile returns up to n last lines of the file at path.
func tailFile(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-window, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil
	}
	return lastLinesOf(b, n)
}
