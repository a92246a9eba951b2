package modelserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/proc"
)

// stderrLines is how many lines of a worker's stderr are kept for error
// messages.
const stderrLines = 50

// process is one running worker process, run by internal/proc in a
// process group of its own.
type process struct {
	h   *proc.Handle
	pid int
	// exited is closed once the process has ended.
	exited <-chan struct{}
}

// procSpec says how to start a worker process.
type procSpec struct {
	path   string
	args   []string
	dir    string
	env    []string
	logger *slog.Logger
	// supervisor runs proc.RunSupervisor (Config.Supervisor); with it the
	// worker is attached: it and everything it forks, setsid() daemons
	// included, die with the front end, even on a SIGKILL, and the
	// supervisor then removes removeOnDeath.
	supervisor    []string
	removeOnDeath []string
}

// startProcess starts the process, with its stdout and stderr logged line
// by line.
func startProcess(spec procSpec) (*process, error) {
	var pid atomic.Int64 // lines may arrive before Start returns
	sink := func(stream string, line []byte) {
		spec.logger.LogAttrs(context.Background(), slog.LevelInfo, string(line),
			slog.Int64("pid", pid.Load()), slog.String("stream", stream))
	}
	s := proc.Spec{Path: spec.path, Args: spec.args, Dir: spec.dir, Env: spec.env,
		Supervisor: spec.supervisor, Sink: sink, TailLines: stderrLines}
	if len(spec.supervisor) > 0 {
		s.RemoveOnParentDeath = spec.removeOnDeath
	}
	h, err := proc.Start(context.Background(), s)
	if err != nil {
		return nil, err
	}
	pid.Store(int64(h.Pid()))
	return &process{h: h, pid: h.Pid(), exited: h.Done()}, nil
}

// signal sends sig to the process's whole group.
func (p *process) signal(sig syscall.Signal) { _ = p.h.Signal(sig) }

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
// Whatever else is left of it is killed too (proc does that once the
// process has exited).
func (p *process) stop(grace time.Duration) { _, _ = p.h.Stop(context.Background(), grace) }

// stderrTail is the last n lines of the process's stderr, cut to at most
// maxBytes from the end.
func (p *process) stderrTail(n, maxBytes int) string {
	return proc.JoinTail(p.h.Tail(n), maxBytes)
}

// exitDescription says how the process ended, e.g. "exited with code 3" or
// "was killed by the kernel OOM killer (SIGKILL, exit 137)". It must only be
// called after exited is closed.
func (p *process) exitDescription() string {
	r := p.h.Result()
	if r.Err == nil && r.Signal != "" && r.Signal != "SIGKILL" && r.ExitCode > 128 {
		return fmt.Sprintf("%s (%s)", r, syscall.Signal(r.ExitCode-128))
	}
	return r.String()
}
