//go:build !linux

package main

// batchScheduling does nothing: SCHED_BATCH is Linux's.
func batchScheduling() (int, error) { return 0, nil }
