package training

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// entryKind is the toolkit's entry point type (TK _entry_point_type.py),
// checked in this order: a .sh name is a command; a setup.py in code/ makes
// a package; a .py name is a program; anything else is a command.
type entryKind uint8

const (
	entryProgram entryKind = iota // python <entry> args
	entryPackage                  // pip install . ; python -m <module> args
	entryCommand                  // /bin/sh -c "./<entry> <quoted args>"
)

func entryKindOf(entry, codeDir string) entryKind {
	switch {
	case strings.HasSuffix(entry, ".sh"):
		return entryCommand
	case exists(filepath.Join(codeDir, "setup.py")):
		return entryPackage
	case strings.HasSuffix(entry, ".py"):
		return entryProgram
	}
	return entryCommand
}

// command is the argv of host h's process, without the shim. passive means
// the host runs nothing of its own (an MPI worker: mpirun on algo-1 starts
// every rank on this machine).
func (s *jobSpec) command(kind entryKind, python string, h hostInfo, masterPort int, stateDir string) (argv []string, passive bool, err error) {
	args := toCmdArgs(s.userHPs)
	var base []string
	switch kind {
	case entryProgram:
		base = append([]string{python, s.entry}, args...)
	case entryPackage:
		base = append([]string{python, "-m", s.moduleName}, args...)
	case entryCommand:
		line := "./" + s.entry
		if len(args) > 0 {
			line += " " + shellJoin(args)
		}
		base = []string{"/bin/sh", "-c", line}
	}
	nproc := s.procsPerHost
	if nproc == 0 {
		nproc = max(h.numGPUs, 1)
	}
	switch s.dist {
	case distTorch:
		if kind != entryProgram {
			return nil, false, clientErrorf("torch_distributed needs a Python script as entry point (a .py file, and no setup.py); got %s", s.entry)
		}
		argv = []string{python, "-m", "torch.distributed.run",
			"--nnodes", strconv.Itoa(len(s.hosts)), "--nproc_per_node", strconv.Itoa(nproc),
			"--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(masterPort),
			"--node_rank", strconv.Itoa(h.index),
			"--log_dir", filepath.Join(stateDir, "torchrun"),
			// Debian's torchrun 1.13 crashes in to_map unless --redirects
			// and --tee name a single stream: Std.from_str looks the value
			// up by iterating the IntFlag, and under Python 3.11 that
			// yields only OUT (1) and ERR (2), so "0" and "3" become None.
			// Stderr is redirected and teed (with torchrun's "[defaultN]:"
			// tag); stdout goes straight to output.log, untagged.
			"--redirects", "2", "--tee", "2",
		}
		return append(append(argv, s.entry), args...), false, nil
	case distMPI:
		mpirun, err := exec.LookPath("mpirun")
		if err != nil {
			return nil, false, clientErrorf("distribution %s runs the job with mpirun, which is not installed on this machine (install Open MPI, or use torch_distributed)", s.distName)
		}
		if h.index != 0 {
			return nil, true, nil
		}
		// Every rank runs on this machine, started by one mpirun on algo-1
		// (the toolkit's MasterRunner, minus ssh). No --tag-output: Open
		// MPI tags each write, and unbuffered Python writes a print in
		// pieces, which garbles lines and defeats metric regexes.
		np := nproc * len(s.hosts)
		argv = []string{mpirun, "--allow-run-as-root", "--oversubscribe",
			"--host", "127.0.0.1:" + strconv.Itoa(np), "-np", strconv.Itoa(np)}
		argv = append(argv, strings.Fields(s.mpiOptions)...)
		return append(argv, base...), false, nil
	}
	return base, false, nil
}

// freePort returns 7777 (the toolkit's MASTER_PORT) when it is free on
// loopback, else a free port the kernel picks.
func freePort() int {
	for _, addr := range []string{"127.0.0.1:7777", "127.0.0.1:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		return port
	}
	return 7777
}

// hostRun is one host of a running job, as the runner sees it.
type hostRun struct {
	info     hostInfo
	stateDir string
	stream   string
	log      *slog.Logger
	tail     *tailer

	rec        launchRecord
	launched   bool
	shimExited chan struct{} // set when this runner started the shim
	child      childRecord

	done     bool
	exit     exitStatus
	failure  string // FailureReason when this host failed
	termSent bool
	killedAt time.Time
}

// launchRecord is shim.json, written by the runner after starting the shim.
type launchRecord struct {
	ShimPID   int       `json:"shim_pid"`
	Argv      []string  `json:"argv"`
	Passive   bool      `json:"passive,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (h *hostRun) path(name string) string { return filepath.Join(h.stateDir, name) }

// startShim starts argv under the shim in a session of its own.
func (r *Runner) startShim(h *hostRun, argv, env []string, poke func()) error {
	if len(r.cfg.ShimCommand) == 0 {
		return errors.New("no shim command configured")
	}
	args := append(append([]string{}, r.cfg.ShimCommand[1:]...), "--dir", h.stateDir, "--")
	cmd := exec.Command(r.cfg.ShimCommand[0], append(args, argv...)...)
	cmd.Dir = h.info.ws.codeDir()
	cmd.Env = env
	lg, err := os.OpenFile(h.path(fileShimLg), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start shim: %w", err)
	}
	defer lg.Close()
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start shim %s: %w", r.cfg.ShimCommand[0], err)
	}
	h.rec = launchRecord{ShimPID: cmd.Process.Pid, Argv: argv, StartedAt: r.now()}
	h.launched = true
	exited := make(chan struct{})
	h.shimExited = exited
	// The shim is reaped here; this goroutine is not tracked by Close,
	// since the shim deliberately outlives the runner.
	go func() {
		_ = cmd.Wait()
		close(exited)
		poke()
	}()
	if err := writeJSONAtomic(h.path(fileShim), h.rec); err != nil {
		return err
	}
	return nil
}

// shimRunning reports whether h's shim is still there: for a shim this
// runner started, until it is reaped; for an adopted one, while
// /proc/<pid> is alive, not a zombie, and its command line names h's
// state directory (so a recycled pid is never mistaken for it).
func (h *hostRun) shimRunning() bool {
	if h.rec.ShimPID <= 0 {
		return false
	}
	if h.shimExited != nil {
		select {
		case <-h.shimExited:
			return false
		default:
			return true
		}
	}
	return procRunsWith(h.rec.ShimPID, h.stateDir)
}

func procRunsWith(pid int, arg string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	found := false
	for _, a := range strings.Split(string(cmdline), "\x00") {
		found = found || a == arg
	}
	if !found {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may hold spaces and parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// childPGID is the process group of h's process, once the shim recorded it.
func (h *hostRun) childPGID() int {
	if h.child.PGID == 0 {
		_ = readJSON(h.path(fileChild), &h.child)
	}
	return h.child.PGID
}

func groupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// terminate asks h's process to stop: SIGTERM through the shim, which
// forwards it to the whole process group (or straight to the group if the
// shim is gone).
func (h *hostRun) terminate() {
	if h.done || h.termSent {
		return
	}
	h.termSent = true
	switch {
	case h.shimRunning():
		_ = syscall.Kill(h.rec.ShimPID, syscall.SIGTERM)
	case groupAlive(h.childPGID()):
		_ = syscall.Kill(-h.childPGID(), syscall.SIGTERM)
	}
	h.log.Info("sent SIGTERM", "pid", h.rec.ShimPID)
}

// kill SIGKILLs h's process group; the shim then records the signal.
func (h *hostRun) kill(now time.Time) {
	if h.done || !h.killedAt.IsZero() {
		return
	}
	h.killedAt = now
	if pg := h.childPGID(); pg > 0 {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	} else if h.shimRunning() {
		_ = syscall.Kill(h.rec.ShimPID, syscall.SIGKILL)
	}
	h.log.Warn("grace period over, sent SIGKILL", "pid", h.rec.ShimPID)
}

// readExit returns exit.json, if the shim wrote it.
func (h *hostRun) readExit() (exitStatus, bool) {
	var st exitStatus
	if err := readJSON(h.path(fileExit), &st); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("unreadable exit status", "err", err)
		}
		return st, false
	}
	return st, true
}
