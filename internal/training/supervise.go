package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// killWait is how long after SIGKILL a host may take to report its exit
// before the runner stops waiting for it.
const killWait = 5 * time.Second

// supervise watches the hosts' processes until all have ended: it tails
// their logs, enforces MaxRuntimeInSeconds, stops every host when one
// fails or a stop is requested (SIGTERM, StopGrace, SIGKILL), and syncs
// checkpoints. ok is false when the runner is closing: the processes keep
// running and Recover picks them up.
func (jr *jobRun) supervise(ctx context.Context) (o outcome, ok bool) {
	r := jr.r
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()

	var deadline <-chan time.Time
	if d := jr.spec.MaxRuntime; d > 0 && jr.stopRequested() == "" {
		t := time.NewTimer(time.Until(jr.trainingStart.Add(d)))
		defer t.Stop()
		deadline = t.C
	}

	ckptCtx, stopCkpt := context.WithCancel(ctx)
	var ckptWG sync.WaitGroup
	ckptWG.Add(1)
	go func() { defer ckptWG.Done(); jr.syncCheckpointsLoop(ckptCtx) }()
	defer func() { stopCkpt(); ckptWG.Wait() }()

	stopC := (<-chan struct{})(jr.stopCh)
	var killAt time.Time
	stopping := false
	beginStop := func(why string) {
		if stopping {
			return
		}
		stopping = true
		jr.log.Info("stopping the job's processes", "why", why, "grace", r.cfg.StopGrace)
		// The grace period counts from the first SIGTERM, which an earlier
		// server may have sent before it crashed.
		first := time.Now()
		for _, h := range jr.hosts {
			h.terminate()
			if !h.termAt.IsZero() && h.termAt.Before(first) {
				first = h.termAt
			}
		}
		killAt = first.Add(r.cfg.StopGrace)
	}
	for {
		for _, h := range jr.hosts {
			jr.pollHost(ctx, h, stopping)
		}
		jr.settlePassive()
		if jr.allDone() {
			break
		}
		if h := jr.firstFailure(); h != nil {
			beginStop("host " + h.info.Name + " failed")
		}
		if stopping && !time.Now().Before(killAt) {
			for _, h := range jr.hosts {
				h.kill(time.Now())
				if !h.done && !h.killedAt.IsZero() && time.Since(h.killedAt) > killWait {
					jr.settle(ctx, h, exitStatus{ExitCode: 137, Signal: "SIGKILL", EndedAt: time.Now()}, "")
				}
			}
		}
		select {
		case <-ctx.Done():
			return outcome{}, false
		case <-stopC:
			stopC = nil
			beginStop("stop requested")
		case <-deadline:
			deadline = nil
			msg := fmt.Sprintf("Training job exceeded MaxRuntimeInSeconds (%d s); stopping it", int(jr.spec.MaxRuntime.Seconds()))
			if err := r.markStopping(context.WithoutCancel(ctx), jr.name, sagebox.SecondaryMaxRuntimeExceeded, msg); err != nil {
				jr.log.Warn("recording MaxRuntimeExceeded failed", "err", err)
			}
			jr.requestStop(sagebox.SecondaryMaxRuntimeExceeded)
		case <-ticker.C:
		case <-jr.wake:
		}
	}
	if reason := jr.stopRequested(); reason != "" {
		return stoppedOutcome(reason, true, jr.spec.MaxRuntime), true
	}
	if h := jr.firstFailure(); h != nil {
		return failedOutcome(h.failure, true), true
	}
	return outcome{Status: sagebox.StatusCompleted, Secondary: sagebox.SecondaryCompleted, Message: msgCompleted, Launched: true}, true
}

// pollHost reads h's new output and notices its end.
func (jr *jobRun) pollHost(ctx context.Context, h *hostRun, stopping bool) {
	if h.done || h.rec.Passive {
		return
	}
	if err := jr.pumpLogs(ctx, h, false); err != nil {
		h.log.Warn("reading the process's output failed", "err", err)
	}
	if h.proc == nil {
		return
	}
	select {
	case <-h.proc.Done():
	default:
		return
	}
	res := h.proc.Result()
	if !errors.Is(res.Err, proc.ErrLost) {
		st := exitStatus{ExitCode: res.ExitCode, Signal: res.Signal, PID: h.proc.Pid(), StartedAt: res.StartedAt, EndedAt: res.EndedAt}
		if res.Err != nil {
			st.Error = res.Err.Error()
		}
		jr.settle(ctx, h, st, "")
		return
	}
	pid := h.rec.ShimPID
	if pid == 0 {
		pid = h.proc.SupervisorPid()
	}
	lost := fmt.Sprintf("InternalServerError: sagebox server restarted and the job's process (pid %d) was gone without an exit status", pid)
	if !h.proc.Adopted() {
		lost = fmt.Sprintf("InternalServerError: the job's process supervisor (pid %d) exited without an exit status", pid)
		if b, err := os.ReadFile(proc.SupervisorLogPath(h.stateDir)); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			lost += ": " + toolkit.LastLines(string(b), 3)
		}
	}
	if stopping {
		lost = ""
	}
	jr.settle(ctx, h, exitStatus{ExitCode: 137, Signal: "SIGKILL", EndedAt: time.Now()}, lost)
}

// settle records h's end and, for a failure, its FailureReason (writing
// output/failure as the toolkit does unless the script wrote its own).
// forced is a reason that overrides the exit status.
func (jr *jobRun) settle(ctx context.Context, h *hostRun, st exitStatus, forced string) {
	if err := jr.pumpLogs(ctx, h, true); err != nil {
		h.log.Warn("reading the process's last output failed", "err", err)
	}
	h.done, h.exit = true, st
	ws := h.info.Workspace
	switch {
	case forced != "":
		h.failure = forced
	case st.ExitCode == 0 && st.Signal == "":
		if err := os.WriteFile(ws.SuccessFile(), nil, 0o644); err != nil {
			h.log.Warn("writing output/success failed", "err", err)
		}
	case h.tail.st.Capture.Gloo:
		// PTK treats this gloo teardown crash as success; so do we.
		h.log.Warn("process exited with gloo::EnforceNotMet at teardown; treated as success, as the PyTorch toolkit does", "exit_code", st.ExitCode)
		_ = os.WriteFile(ws.SuccessFile(), nil, 0o644)
	default:
		msg := h.tail.st.Capture.Message(ws.CodeDir())
		if st.Error != "" {
			msg = st.Error
		}
		text, err := toolkit.WriteFailureFile(ws, toolkit.ExecuteUserScriptError(st.ExitCode, st.Signal, msg, h.rec.Argv))
		if err != nil {
			h.log.Warn("writing output/failure failed", "err", err)
		}
		h.failure = toolkit.AlgorithmError(text)
	}
	h.log.Info("process ended", "pid", h.rec.ShimPID, "exit_code", st.ExitCode, "signal", st.Signal, "failed", h.failure != "")
}

// settlePassive ends MPI worker hosts once every active host has ended.
func (jr *jobRun) settlePassive() {
	for _, h := range jr.hosts {
		if !h.rec.Passive && !h.done {
			return
		}
	}
	for _, h := range jr.hosts {
		if h.rec.Passive && !h.done {
			h.done = true
			_ = os.WriteFile(h.info.Workspace.SuccessFile(), nil, 0o644)
		}
	}
}

func (jr *jobRun) allDone() bool {
	for _, h := range jr.hosts {
		if !h.done {
			return false
		}
	}
	return true
}

// firstFailure is the failed host that ended first (SageMaker: the first
// non-zero exit fails the job).
func (jr *jobRun) firstFailure() *hostRun {
	var first *hostRun
	for _, h := range jr.hosts {
		if !h.done || h.failure == "" {
			continue
		}
		if first == nil || (!h.exit.EndedAt.IsZero() && h.exit.EndedAt.Before(first.exit.EndedAt)) {
			first = h
		}
	}
	return first
}
