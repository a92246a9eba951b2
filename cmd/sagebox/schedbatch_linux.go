package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// batchScheduling moves every thread of this process that runs under the
// default policy (SCHED_OTHER) to SCHED_BATCH, keeping its nice value, and
// returns how many it moved. Threads and processes started afterwards
// inherit the policy from the thread that starts them. Threads under a
// policy someone chose (real-time, SCHED_IDLE) are left alone.
//
// The effect that matters: a SCHED_BATCH thread that wakes up does not
// preempt the thread running on its CPU; it waits for that thread to block
// or for the end of its time slice. The front end and the workers hand
// every request back and forth, and each hand-off wakes the other side;
// with wake-up preemption, on a busy machine a woken front end thread
// interrupts a worker in the middle of its handler (and the other way
// round) at every hand-off.
func batchScheduling() (int, error) {
	moved := 0
	// A second pass catches threads started during the first.
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return moved, fmt.Errorf("list threads: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			attr, err := unix.SchedGetAttr(tid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread exited
			}
			if err != nil {
				return moved, fmt.Errorf("read the scheduling policy of thread %d: %w", tid, err)
			}
			if attr.Policy != unix.SCHED_NORMAL {
				continue
			}
			attr.Policy = unix.SCHED_BATCH
			attr.Flags = 0
			if err := unix.SchedSetAttr(tid, attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return moved, fmt.Errorf("set SCHED_BATCH on thread %d: %w", tid, err)
			}
			moved++
		}
	}
	return moved, nil
}
