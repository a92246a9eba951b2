package training

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// hostRun is one host of a running job, as the runner sees it.
type hostRun struct {
	info     toolkit.Host
	stateDir string
	stream   string
	log      *slog.Logger
	tail     *tailer

	rec      launchRecord
	launched bool
	proc     *proc.Handle // nil for a passive host, or one never started
	adoptErr error        // the host's process state could not be re-adopted

	done     bool
	exit     exitStatus
	failure  string // FailureReason when this host failed
	termSent bool
	termAt   time.Time // when SIGTERM was sent (maybe by an earlier server)
	killedAt time.Time
}

// launchRecord is shim.json, the runner's record of a host's launch. It is
// written before the process is started (so a restart knows a launch was
// under way: internal/proc's own intent says whether anything ran), and
// again with the supervisor's pid once it has started. Older binaries
// wrote it only after the start, with the pid (see proc.AdoptLegacy).
type launchRecord struct {
	ShimPID   int       `json:"shim_pid"`
	Argv      []string  `json:"argv"`
	Passive   bool      `json:"passive,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (h *hostRun) path(name string) string { return filepath.Join(h.stateDir, name) }

// startShim starts argv detached, under the process supervisor
// (internal/proc), with its output in the host's state directory.
func (r *Runner) startShim(ctx context.Context, h *hostRun, argv, env []string, poke func()) error {
	if len(r.cfg.ShimCommand) == 0 {
		return errors.New("no shim command configured")
	}
	h.rec = launchRecord{Argv: argv, StartedAt: r.now()}
	if err := writeJSONAtomic(h.path(fileShim), h.rec); err != nil {
		return err
	}
	p, err := proc.Start(ctx, proc.Spec{
		Path: argv[0], Args: argv[1:], Dir: h.info.Workspace.CodeDir(), Env: env,
		Detach: true, StateDir: h.stateDir, Supervisor: r.cfg.ShimCommand,
	})
	if err != nil {
		return err
	}
	h.proc, h.launched = p, true
	h.rec.ShimPID = p.SupervisorPid()
	// The watcher is not tracked by Close: the process deliberately
	// outlives the runner.
	go func() {
		<-p.Done()
		poke()
	}()
	return writeJSONAtomic(h.path(fileShim), h.rec)
}

// terminate asks h's process to stop: SIGTERM to its whole process group,
// unless one was sent already (by this server or, before a restart, by an
// earlier one: a script in its SIGTERM handler is not signalled twice).
func (h *hostRun) terminate() {
	if h.done || h.termSent || h.proc == nil {
		return
	}
	h.termSent = true
	if at := h.proc.TermSentAt(); !at.IsZero() {
		h.termAt = at
		h.log.Info("SIGTERM was sent already; waiting for the grace period", "sent_at", at)
		return
	}
	if err := h.proc.Signal(syscall.SIGTERM); err != nil {
		h.log.Warn("sending SIGTERM failed", "err", err)
	}
	h.termAt = h.proc.TermSentAt()
	h.log.Info("sent SIGTERM", "pid", h.rec.ShimPID)
}

// kill SIGKILLs h's process group; the supervisor then records the signal.
func (h *hostRun) kill(now time.Time) {
	if h.done || !h.killedAt.IsZero() || h.proc == nil {
		return
	}
	h.killedAt = now
	_ = h.proc.Signal(syscall.SIGKILL)
	h.log.Warn("grace period over, sent SIGKILL", "pid", h.rec.ShimPID)
}
