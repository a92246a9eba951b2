package proc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/statefile"
)

// Errors of Start and Adopt.
var (
	// ErrNotStarted: the state directory shows that nothing was ever run
	// from it (no launch intent, or a supervisor that died before it
	// started the command). Starting afresh is safe.
	ErrNotStarted = errors.New("no process was started from this state directory")
	// ErrCorrupt: a state file cannot be decoded. Nothing is signalled.
	ErrCorrupt = statefile.ErrCorrupt
	// ErrLost is in Result.Err when the process ended (or vanished)
	// without leaving an exit status.
	ErrLost = errors.New("the process is gone without an exit status")
)

// Spec says what to run and how.
type Spec struct {
	Path string   // the program (looked up in PATH by the supervisor if not absolute)
	Args []string // arguments, without argv[0]
	Dir  string
	Env  []string // the whole environment; nil means this process's

	// Detach makes the process outlive its parent; StateDir is then
	// required (it is created) and Supervisor too.
	Detach   bool
	StateDir string

	// Supervisor is the argv that runs RunSupervisor, e.g.
	// {"/usr/local/bin/sagebox", "exec-shim"}. Attached processes run
	// without one when it is empty (and forks that leave the process group
	// may then outlive the parent).
	Supervisor []string

	// RemoveOnParentDeath are paths an attached supervisor removes
	// (os.RemoveAll) after it has killed the command's subtree because its
	// parent died: the parent's temporary files, which it cannot remove
	// itself after a SIGKILL. Not removed on any other exit. Needs
	// Supervisor.
	RemoveOnParentDeath []string

	// Sink gets the output of an attached process line by line (nil:
	// discarded). Detached output goes to OutputPath(StateDir) instead.
	Sink Sink
	// TailLines is how many lines of an attached process's stderr Tail
	// keeps (default 50).
	TailLines int

	// Credential, if set, is the user and group the command runs as (no
	// supplementary groups unless Groups says so). Only the command: the
	// supervisor keeps this process's identity, so it can still signal
	// the subtree and write its state files, which the command cannot
	// touch. Setting another user needs root.
	Credential *syscall.Credential

	// HostsFile, if set, is bind-mounted over /etc/hosts for the command
	// and everything it starts, in a mount namespace of their own (the
	// machine's /etc/hosts is untouched), so that the ordinary resolver
	// reads it in every program. Hostname, if set, is the command's host
	// name (gethostname), in a UTS namespace of its own. Both need a
	// Supervisor, and root (CheckIsolation says whether they work here).
	HostsFile string
	Hostname  string
}

// Result is how a process ended.
type Result struct {
	ExitCode  int    // exit code, or 128+signal
	Signal    string // "SIGKILL" when killed by a signal, else ""
	OOMKilled bool   // killed by the kernel's OOM killer (SIGKILL while the cgroup's oom_kill count rose)
	Killed    bool   // SIGKILL was sent through this Handle
	StartedAt time.Time
	EndedAt   time.Time
	// Err is set when the command could not be started (ExitCode 126 or
	// 127) or when no exit status could be had (wrapping ErrLost).
	Err error
}

// String says how the process ended, e.g. "exited with code 3".
func (r Result) String() string {
	switch {
	case r.Err != nil && errors.Is(r.Err, ErrLost):
		return "ended without an exit status: " + r.Err.Error()
	case r.Err != nil:
		return "could not start: " + r.Err.Error()
	case r.Signal == "SIGKILL" && r.Killed:
		return "was killed (SIGKILL)"
	case r.Signal == "SIGKILL" && r.OOMKilled:
		return "was killed by the kernel OOM killer (SIGKILL, exit 137)"
	case r.Signal == "SIGKILL":
		return "was killed by SIGKILL (exit 137), most likely by the kernel OOM killer"
	case r.Signal != "":
		return fmt.Sprintf("was killed by signal %s", r.Signal)
	}
	return fmt.Sprintf("exited with code %d", r.ExitCode)
}

// Handle is a started or adopted process. Its methods are safe for
// concurrent use.
type Handle struct {
	pid     atomic.Int64 // the command's pid (its process group id)
	supPID  int          // the supervisor's pid, 0 without one
	detach  bool
	dir     string // detached: state directory
	run     string
	adopted bool

	sup   identity // detached: the supervisor, checked before any signal
	child atomic.Pointer[childRecord]

	stderr *ring
	done   chan struct{}
	res    Result
	killed atomic.Bool

	mu     sync.Mutex
	termAt time.Time
}

// Pid is the command's pid, which is also its process group id (0 until
// a detached supervisor has started it).
func (h *Handle) Pid() int {
	if p := h.pid.Load(); p != 0 {
		return int(p)
	}
	if c := h.childRec(); c != nil {
		return c.PID
	}
	return 0
}

// SupervisorPid is the supervisor's pid (0 when there is none).
func (h *Handle) SupervisorPid() int { return h.supPID }

// Adopted reports whether the handle came from Adopt.
func (h *Handle) Adopted() bool { return h.adopted }

// Done is closed once the process has ended and Result is final.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Result is how the process ended; only valid once Done is closed.
func (h *Handle) Result() Result {
	<-h.done
	return h.res
}

// Tail returns up to n of the last lines the process wrote to stderr
// (attached), or to its output file (detached), oldest first.
func (h *Handle) Tail(n int) []string {
	if h.detach {
		return tailFile(OutputPath(h.dir), n)
	}
	if h.stderr == nil {
		return nil
	}
	return h.stderr.last(n)
}

// TermSentAt is when SIGTERM was first sent through Signal or Stop
// (surviving re-adoption for a detached process), or the zero time.
func (h *Handle) TermSentAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.termAt
}

// Signal sends sig to the process's whole group. A signal to a process
// that has ended, or whose recorded identity no longer matches, is not
// sent (nil). A detached process's first SIGTERM is recorded first, so
// that TermSentAt survives a restart.
func (h *Handle) Signal(sig syscall.Signal) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	if sig == syscall.SIGTERM {
		if err := h.noteTerm(); err != nil {
			return err
		}
	}
	if sig == syscall.SIGKILL {
		h.killed.Store(true)
	}
	if h.detach {
		return h.signalDetached(sig)
	}
	pid := int(h.pid.Load())
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

func (h *Handle) noteTerm() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.termAt.IsZero() {
		return nil
	}
	h.termAt = time.Now()
	if h.detach {
		if err := statefile.WriteJSON(termPath(h.dir), termRecord{At: h.termAt, Run: h.run}); err != nil {
			return err
		}
	}
	return nil
}

// Stop ends the process: SIGTERM to its group (unless one was sent
// already, also before a re-adoption), then SIGKILL once grace has passed
// since that SIGTERM. It returns the Result, or ctx's error when ctx ends
// first.
func (h *Handle) Stop(ctx context.Context, grace time.Duration) (Result, error) {
	select {
	case <-h.done:
		return h.res, nil
	default:
	}
	if h.TermSentAt().IsZero() {
		if err := h.Signal(syscall.SIGTERM); err != nil {
			return Result{}, err
		}
	}
	t := time.NewTimer(time.Until(h.TermSentAt().Add(grace)))
	defer t.Stop()
	select {
	case <-h.done:
		return h.res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-t.C:
	}
	if err := h.Signal(syscall.SIGKILL); err != nil {
		return Result{}, err
	}
	select {
	case <-h.done:
		return h.res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Start starts the command in s.
func Start(ctx context.Context, s Spec) (*Handle, error) {
	if s.Path == "" {
		return nil, errors.New("start: no program")
	}
	if s.Detach {
		return startDetached(ctx, s)
	}
	if len(s.Supervisor) == 0 {
		if len(s.RemoveOnParentDeath) > 0 {
			return nil, errors.New("start: RemoveOnParentDeath needs a Supervisor")
		}
		if s.HostsFile != "" || s.Hostname != "" {
			return nil, errors.New("start: HostsFile and Hostname need a Supervisor")
		}
		return startDirect(s)
	}
	return startSupervised(ctx, s)
}

func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (h *Handle) pumps(s Spec) (*LineWriter, *LineWriter) {
	n := s.TailLines
	if n <= 0 {
		n = 50
	}
	h.stderr = newRing(n)
	out := NewLineWriter("stdout", s.Sink)
	errw := NewLineWriter("stderr", s.Sink)
	errw.ring = h.stderr
	return out, errw
}

// startDirect runs an attached command without a supervisor.
func startDirect(s Spec) (*Handle, error) {
	h := &Handle{done: make(chan struct{})}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.SysProcAttr = childAttr()
	cmd.SysProcAttr.Credential = s.Credential
	// Wait returns at most this long after the process exits even when a
	// grandchild still holds its stdout or stderr.
	cmd.WaitDelay = 2 * time.Second
	out, errw := h.pumps(s)
	cmd.Stdout, cmd.Stderr = out, errw
	oomBefore := oomKills()
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	pid := cmd.Process.Pid
	h.pid.Store(int64(pid))
	go func() {
		err := cmd.Wait()
		out.Flush()
		errw.Flush()
		_ = syscall.Kill(-pid, syscall.SIGKILL) // what is left of the group
		r := Result{StartedAt: started, EndedAt: time.Now(), Killed: h.killed.Load()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			ws, _ := ee.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				r.Signal, r.ExitCode = signalName(ws.Signal()), 128+int(ws.Signal())
				r.OOMKilled = ws.Signal() == syscall.SIGKILL && !r.Killed && oomBefore >= 0 && oomKills() > oomBefore
			} else {
				r.ExitCode = ws.ExitStatus()
			}
		case err != nil && !errors.Is(err, exec.ErrWaitDelay):
			r.Err = fmt.Errorf("%w: %v", ErrLost, err)
		}
		h.res = r
		close(h.done)
	}()
	return h, nil
}

// startSupervised runs an attached command under the supervisor, which
// reports on a pipe (its fd 3).
func startSupervised(ctx context.Context, s Spec) (*Handle, error) {
	h := &Handle{done: make(chan struct{})}
	args := append(append([]string{}, s.Supervisor[1:]...), "--attached", "--parent", strconv.Itoa(os.Getpid()))
	args = append(args, credentialArgs(s.Credential)...)
	args = append(args, isolationArgs(s)...)
	for _, p := range s.RemoveOnParentDeath {
		args = append(args, "--remove-on-parent-death", p)
	}
	args = append(args, "--", s.Path)
	cmd := exec.Command(s.Supervisor[0], append(args, s.Args...)...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	out, errw := h.pumps(s)
	cmd.Stdout, cmd.Stderr = out, errw
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	// The lifeline: the supervisor's stdin, whose write end only this
	// process holds (close-on-exec), so the supervisor reads end of file
	// exactly when this process is gone, however it ended.
	lr, lw, err := os.Pipe()
	if err != nil {
		sr.Close()
		sw.Close()
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	cmd.Stdin = lr
	cmd.ExtraFiles = []*os.File{sw}
	if err := cmd.Start(); err != nil {
		sr.Close()
		sw.Close()
		lr.Close()
		lw.Close()
		return nil, fmt.Errorf("start supervisor %s: %w", s.Supervisor[0], err)
	}
	sw.Close()
	lr.Close()
	h.supPID = cmd.Process.Pid
	lines := bufio.NewScanner(sr)
	var exit *exitRecord
	readLine := func() bool {
		if !lines.Scan() {
			return false
		}
		kind, body, _ := strings.Cut(lines.Text(), " ")
		switch kind {
		case "child":
			var c childRecord
			if json.Unmarshal([]byte(body), &c) == nil {
				h.pid.Store(int64(c.PID))
			}
		case "exit":
			var e exitRecord
			if json.Unmarshal([]byte(body), &e) == nil {
				exit = &e
			}
		}
		return true
	}
	for h.pid.Load() == 0 && exit == nil && readLine() {
	}
	finish := func() {
		for readLine() {
		}
		sr.Close()
		werr := cmd.Wait()
		lw.Close() // held until here, also against the garbage collector
		out.Flush()
		errw.Flush()
		r := Result{Killed: h.killed.Load()}
		switch {
		case exit == nil:
			r.Err = fmt.Errorf("%w: the process supervisor (pid %d) ended (%v)", ErrLost, h.supPID, werr)
			r.ExitCode, r.Signal = 137, "SIGKILL"
		case exit.Error != "":
			r.ExitCode, r.Err = exit.ExitCode, errors.New(exit.Error)
		default:
			r.ExitCode, r.Signal = exit.ExitCode, exit.Signal
			r.OOMKilled = exit.OOMKilled && !r.Killed
		}
		if exit != nil {
			r.StartedAt, r.EndedAt = exit.StartedAt, exit.EndedAt
		}
		h.res = r
		close(h.done)
	}
	if h.pid.Load() == 0 {
		// It never ran.
		finish()
		if h.res.Err != nil {
			return nil, fmt.Errorf("start %s: %w", s.Path, h.res.Err)
		}
		return nil, fmt.Errorf("start %s: the supervisor ended at once (%s)", s.Path, h.res)
	}
	go finish()
	return h, nil
}
