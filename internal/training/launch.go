package training

import (
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/training/driver"
)

// hostRun is one host of a running job, as the runner sees it.
type hostRun struct {
	index    int
	name     string
	stateDir string // the runner's (and the driver's) files for this host
	stream   string
	log      *slog.Logger
	tail     *tailer

	launched bool
	task     driver.Task // nil for a host never started
	adoptErr error       // the host's task could not be re-adopted

	done     bool
	exit     driver.Result
	failure  string // FailureReason when this host failed
	termSent bool
	termAt   time.Time // when SIGTERM was sent (maybe by an earlier server)
	killedAt time.Time
}

func (h *hostRun) path(name string) string { return filepath.Join(h.stateDir, name) }

// passive reports an MPI worker host, which runs nothing of its own.
func (h *hostRun) passive() bool { return h.task != nil && h.task.Passive() }

// terminate asks h's task to stop: SIGTERM to everything it runs, unless
// one was sent already (by this server or, before a restart, by an
// earlier one: a script in its SIGTERM handler is not signalled twice).
func (h *hostRun) terminate() {
	if h.done || h.termSent || h.task == nil || h.passive() {
		return
	}
	h.termSent = true
	if at := h.task.TermSentAt(); !at.IsZero() {
		h.termAt = at
		h.log.Info("SIGTERM was sent already; waiting for the grace period", "sent_at", at)
		return
	}
	if err := h.task.Signal(syscall.SIGTERM); err != nil {
		h.log.Warn("sending SIGTERM failed", "err", err)
	}
	h.termAt = h.task.TermSentAt()
	if h.termAt.IsZero() {
		h.termAt = time.Now()
	}
	h.log.Info("sent SIGTERM", "task", h.task.ID())
}

// kill SIGKILLs h's task.
func (h *hostRun) kill(now time.Time) {
	if h.done || !h.killedAt.IsZero() || h.task == nil || h.passive() {
		return
	}
	h.killedAt = now
	_ = h.task.Signal(syscall.SIGKILL)
	h.log.Warn("grace period over, sent SIGKILL", "task", h.task.ID())
}
