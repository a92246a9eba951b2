package training

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
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
			beginStop("host " + h.name + " failed")
		}
		if stopping && !time.Now().Before(killAt) {
			for _, h := range jr.hosts {
				h.kill(time.Now())
				if !h.done && !h.killedAt.IsZero() && time.Since(h.killedAt) > killWait {
					jr.settle(ctx, h, driver.Result{ExitCode: 137, Signal: "SIGKILL", EndedAt: time.Now()}, "")
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
	return outcome{Outcome: sagebox.Outcome{Status: sagebox.StatusCompleted, Secondary: sagebox.SecondaryCompleted, Message: msgCompleted}, Launched: true}, true
}

// pollHost reads h's new output and notices its end.
func (jr *jobRun) pollHost(ctx context.Context, h *hostRun, stopping bool) {
	if h.done || h.passive() {
		return
	}
	if err := jr.pumpLogs(ctx, h, false); err != nil {
		h.log.Warn("reading the process's output failed", "err", err)
	}
	if h.task == nil {
		return
	}
	if name := h.tail.st.Capture.Unresolved; name != "" {
		// torch.distributed retries a name that does not resolve until its
		// timeout: end the host now (settle gives the reason).
		if !h.termSent {
			h.log.Warn("torch.distributed cannot resolve a host name; stopping the host", "name", name)
			jr.note(ctx, []*hostRun{h}, "torch.distributed cannot resolve host name %q (it would retry until its timeout); stopping %s. This job's hosts are %s",
				name, h.name, strings.Join(jr.spec.Hosts, ", "))
		}
		h.terminate()
		if time.Since(h.termAt) > jr.r.cfg.StopGrace {
			h.kill(time.Now())
		}
	}
	select {
	case <-h.task.Done():
	default:
		return
	}
	res := h.task.Result()
	if !res.Lost {
		jr.settle(ctx, h, res, "")
		return
	}
	lost := "InternalServerError: " + res.Err.Error()
	if stopping {
		lost = ""
	}
	jr.settle(ctx, h, driver.Result{ExitCode: 137, Signal: "SIGKILL", EndedAt: time.Now()}, lost)
}

// settle records h's end and, for a failure, its FailureReason (the driver
// writes output/failure as the toolkit does, unless the script wrote its
// own). forced is a reason that overrides the exit status.
func (jr *jobRun) settle(ctx context.Context, h *hostRun, res driver.Result, forced string) {
	if err := jr.pumpLogs(ctx, h, true); err != nil {
		h.log.Warn("reading the process's last output failed", "err", err)
	}
	h.done, h.exit = true, res
	switch {
	case forced != "":
		h.failure = forced
	case res.ExitCode == 0 && res.Signal == "" && res.Err == nil:
		if _, err := jr.r.driver.Settle(jr.job, h.index, ""); err != nil {
			h.log.Warn("recording success failed", "err", err)
		}
	case h.tail.st.Capture.Unresolved != "":
		text, err := jr.r.driver.Settle(jr.job, h.index, toolkit.UnresolvedHostError(h.tail.st.Capture.Unresolved, jr.spec.Hosts))
		if err != nil {
			h.log.Warn("writing output/failure failed", "err", err)
		}
		h.failure = toolkit.AlgorithmError(text)
	case h.tail.st.Capture.Gloo:
		// PTK treats this gloo teardown crash as success; so do we.
		h.log.Warn("process exited with gloo::EnforceNotMet at teardown; treated as success, as the PyTorch toolkit does", "exit_code", res.ExitCode)
		_, _ = jr.r.driver.Settle(jr.job, h.index, "")
	default:
		msg := h.tail.st.Capture.Message(jr.codeDir(h.index))
		if res.Err != nil {
			msg = res.Err.Error()
		}
		var argv []string
		if h.task != nil {
			argv = h.task.Argv()
		}
		text, err := jr.r.driver.Settle(jr.job, h.index, toolkit.ExecuteUserScriptError(res.ExitCode, res.Signal, msg, argv))
		if err != nil {
			h.log.Warn("writing output/failure failed", "err", err)
		}
		h.failure = toolkit.AlgorithmError(text)
	}
	id := ""
	if h.task != nil {
		id = h.task.ID()
	}
	h.log.Info("process ended", "task", id, "exit_code", res.ExitCode, "signal", res.Signal, "failed", h.failure != "")
}

// settlePassive ends MPI worker hosts once every active host has ended.
func (jr *jobRun) settlePassive() {
	for _, h := range jr.hosts {
		if !h.passive() && !h.done {
			return
		}
	}
	for _, h := range jr.hosts {
		if h.passive() && !h.done {
			h.done = true
			_, _ = jr.r.driver.Settle(jr.job, h.index, "")
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
// non-zero exit fails the job). A host that failed without running (its
// task could not start, or could not be re-adopted after a restart) has
// no end time: it failed before any running host was stopped, so it
// comes first, whatever its index.
func (jr *jobRun) firstFailure() *hostRun {
	var first *hostRun
	for _, h := range jr.hosts {
		if !h.done || h.failure == "" {
			continue
		}
		if first == nil || endedBefore(h.exit.EndedAt, first.exit.EndedAt) {
			first = h
		}
	}
	return first
}

// endedBefore orders failures by end time, a zero time (no run) first.
func endedBefore(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() && !b.IsZero()
	}
	return a.Before(b)
}
