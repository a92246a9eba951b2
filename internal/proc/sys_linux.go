package proc

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func unixSignalName(s syscall.Signal) string { return unix.SignalName(s) }

// becomeSubreaper makes orphaned descendants re-parent to this process.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// childAttr is the command's SysProcAttr: a group of its own, and SIGKILL
// if its parent (the supervisor, or the caller without one) dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
