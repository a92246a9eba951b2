package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
)

// processTuning is what `sagebox model-server` changes for its whole
// process, and so for the workers it starts. The modelserver library never
// does: a process that embeds servers chooses for itself.
type processTuning struct {
	// goMaxProcsSet is true when GOMAXPROCS is in the environment: the
	// user's choice always wins.
	goMaxProcsSet bool
	// schedBatch is SAGEBOX_SCHED_BATCH.
	schedBatch bool
}

func tuningFromEnv(getenv func(string) string) (processTuning, error) {
	t := processTuning{goMaxProcsSet: getenv("GOMAXPROCS") != ""}
	if v := strings.TrimSpace(getenv("SAGEBOX_SCHED_BATCH")); v != "" {
		switch strings.ToLower(v) {
		case "1", "true", "yes", "on":
			t.schedBatch = true
		case "0", "false", "no", "off":
		default:
			return t, fmt.Errorf("invalid model server configuration: SAGEBOX_SCHED_BATCH=%q: must be true or false", v)
		}
	}
	return t, nil
}

// goProcs is the GOMAXPROCS for a front end whose workers run on gpus GPUs
// (0: on the CPUs) with cpus usable CPUs, or 0 to leave the runtime alone.
//
// The front end and CPU workers share the CPUs, and while a P is idle Go
// wakes a spinning thread for each goroutine hand-off (request → worker
// goroutine → request), CPU the workers then lack: on 2 CPUs with 2 workers
// a front end limited to 1 P answers a batch-1 request in about two thirds
// of the time and serves about a fifth more of them (bench/modelserver).
// Hence half the CPUs, at least 1, for CPU workers; GPU workers leave the
// CPUs mostly free and the runtime alone.
func goProcs(cpus, gpus int) int {
	if gpus > 0 {
		return 0
	}
	return max(1, cpus/2)
}

// apply sizes the Go scheduler and, with schedBatch, moves the process to
// SCHED_BATCH. Call it before the server starts its workers, so that they
// inherit the policy.
//
// SCHED_BATCH: woken threads no longer preempt the one running on their
// CPU, so the front end and the workers stop interrupting each other at
// every hand-off of a request: on 2 CPUs with 2 workers, 1.25x the batched
// and 1.15x the unbatched throughput (bench/modelserver). The price is paid
// when other programs keep the CPUs busy: the server's threads no longer
// preempt them either and wait for them to block or use up their time
// slice: next to two busy loops, one request at a time was served at a
// quarter of the rate (median of 4 alternating pairs, p50 up to 10x
// higher). Hence off by default, meant for a dedicated serving host.
func (t processTuning) apply(logger *slog.Logger, gpus int) {
	if procs := goProcs(runtime.NumCPU(), gpus); procs > 0 && !t.goMaxProcsSet {
		if was := runtime.GOMAXPROCS(procs); was != procs {
			logger.Info("sizing the Go scheduler to leave the CPUs to the workers", "gomaxprocs", procs, "was", was)
		}
	}
	if t.schedBatch {
		if moved, err := batchScheduling(); err != nil {
			logger.Warn("could not move the model server to SCHED_BATCH; running under the default policy", "error", err)
		} else if moved > 0 {
			logger.Info("scheduling the front end and the workers as batch work (SCHED_BATCH)", "threads", moved)
		}
	}
}
