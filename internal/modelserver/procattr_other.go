//go:build unix && !linux

package modelserver

import "syscall"

// sysProcAttr puts a worker in its own process group, so that the whole
// tree it forks can be signalled at once.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
