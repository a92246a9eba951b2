package modelserver

import "syscall"

// sysProcAttr puts a worker in its own process group, so that the whole
// tree it forks can be signalled at once, and has the kernel kill it if the
// front end dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
