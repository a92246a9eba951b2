package modelserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stderrLines is how many lines of a worker's stderr are kept for error
// messages.
const stderrLines = 50

// maxLogLine is the longest worker output line logged in one piece.
const maxLogLine = 64 << 10

// process is one running worker process and its process group.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stderr *lineRing
	// exited is closed once the process has been reaped; waitErr is set
	// before that.
	exited  chan struct{}
	waitErr error
	// killed is set when the front end itself sent SIGKILL.
	killed    atomic.Bool
	oomBefore int64
}

// procSpec says how to start a worker process.
type procSpec struct {
	path   string
	args   []string
	dir    string
	env    []string
	logger *slog.Logger
}

// startProcess starts the process in a new process group, with its stdout
// and stderr pumped line by line into the logger.
func startProcess(spec procSpec) (*process, error) {
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	cmd.SysProcAttr = sysProcAttr()
	// Wait returns at most this long after the process exits even when a
	// grandchild still holds its stdout or stderr.
	cmd.WaitDelay = 2 * time.Second
	p := &process{cmd: cmd, stderr: newLineRing(stderrLines), exited: make(chan struct{}), oomBefore: oomKills()}
	out := &linePump{logger: spec.logger, stream: "stdout"}
	errw := &linePump{logger: spec.logger, stream: "stderr", ring: p.stderr}
	cmd.Stdout, cmd.Stderr = out, errw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.path, err)
	}
	p.pid = cmd.Process.Pid
	out.pid.Store(int64(p.pid))
	errw.pid.Store(int64(p.pid))
	go func() {
		p.waitErr = cmd.Wait()
		out.flush()
		errw.flush()
		close(p.exited)
	}()
	return p, nil
}

// signal sends sig to the process's whole group.
func (p *process) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p.killed.Store(true)
	}
	// The group id is the leader's pid (Setpgid). ESRCH once all are gone.
	_ = syscall.Kill(-p.pid, sig)
}

// wait waits up to d for the process to exit and reports whether it did.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the process: SIGTERM to the group, then SIGKILL after grace.
// Whatever else is left in the group is killed too.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.exited:
	default:
		p.signal(syscall.SIGTERM)
		if !p.wait(grace) {
			p.signal(syscall.SIGKILL)
			<-p.exited
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

// exitDescription says how the process ended, e.g. "exited with code 3" or
// "was killed by the kernel OOM killer (SIGKILL, exit 137)". It must only be
// called after exited is closed.
func (p *process) exitDescription() string {
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		if p.waitErr == nil {
			return "exited with code 0"
		}
		return "ended: " + p.waitErr.Error()
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok {
		return ee.Error()
	}
	switch {
	case ws.Exited():
		return fmt.Sprintf("exited with code %d", ws.ExitStatus())
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		if p.killed.Load() {
			return "was killed (SIGKILL)"
		}
		if after := oomKills(); p.oomBefore >= 0 && after > p.oomBefore {
			return "was killed by the kernel OOM killer (SIGKILL, exit 137)"
		}
		return "was killed by SIGKILL (exit 137), most likely by the kernel OOM killer"
	case ws.Signaled():
		return fmt.Sprintf("was killed by signal %s (%s)", signalName(ws.Signal()), ws.Signal())
	}
	return ee.Error()
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
		syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT",
		syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// oomKills returns the OOM-kill count of this process's memory cgroup
// (cgroup v2 memory.events or v1 memory.oom_control), or -1 when unknown.
func oomKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	var candidates []string
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates, filepath.Join("/sys/fs/cgroup", parts[2], "memory.events"))
		case strings.Contains(","+parts[1]+",", ",memory,"):
			candidates = append(candidates, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control"))
		}
	}
	for _, path := range candidates {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// lineRing keeps the last lines written to it.
type lineRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLineRing(n int) *lineRing { return &lineRing{lines: make([]string, n)} }

func (r *lineRing) add(line string) {
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// tail returns up to n of the last lines, oldest first, joined by newlines
// and cut to at most maxBytes from the end.
func (r *lineRing) tail(n, maxBytes int) string {
	r.mu.Lock()
	var out []string
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	n = min(n, count)
	for i := n; i > 0; i-- {
		out = append(out, r.lines[(r.next-i+len(r.lines))%len(r.lines)])
	}
	r.mu.Unlock()
	s := strings.Join(out, "\n")
	if len(s) > maxBytes {
		s = "…" + s[len(s)-maxBytes:]
	}
	return s
}

// linePump is an io.Writer that logs each complete line it is given.
type linePump struct {
	logger *slog.Logger
	stream string
	pid    atomic.Int64 // set after start; lines may arrive before
	ring   *lineRing
	buf    []byte
}

func (l *linePump) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			if len(l.buf) >= maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			break
		}
		if len(l.buf) > 0 {
			l.buf = append(l.buf, p[:i]...)
			l.emit(l.buf)
			l.buf = l.buf[:0]
		} else {
			l.emit(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

func (l *linePump) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
}

func (l *linePump) emit(line []byte) {
	s := string(bytes.TrimRight(line, "\r"))
	if l.ring != nil {
		l.ring.add(s)
	}
	l.logger.LogAttrs(context.Background(), slog.LevelInfo, s,
		slog.Int64("pid", l.pid.Load()), slog.String("stream", l.stream))
}
