package training

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/proc"
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

	rec      launchRecord
	launched bool
	proc     *proc.Handle // nil for a passive host, or one never started
	adoptErr error        // the host's process state could not be re-adopted

	done     bool
	exit     exitStatus
	failure  string // FailureReason when this host failed
	termSent bool
	termAt   time.Time // when SIGTERM was sent (maybe by an earlier server)
	killedAt time.Time
}

// launchRecord is shim.json, the runner's record of a host's launch. It is
// written before the process is started (so a restart knows a launch was
// under way: internal/proc's own intent says whether anything ran), and
// again with the supervisor's pid once it has started. Older binaries
// wrote it only after the start, with the pid (see proc.AdoptLegacy).
type launchRecord struct {
	ShimPID   int       `json:"shim_pid"`
	Argv      []string  `json:"argv"`
	Passive   bool      `json:"passive,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (h *hostRun) path(name string) string { return filepath.Join(h.stateDir, name) }

// startShim starts argv detached, under the process supervisor
// (internal/proc), with its output in the host's state directory.
func (r *Runner) startShim(ctx context.Context, h *hostRun, argv, env []string, poke func()) error {
	if len(r.cfg.ShimCommand) == 0 {
		return errors.New("no shim command configured")
	}
	h.rec = launchRecord{Argv: argv, StartedAt: r.now()}
	if err := writeJSONAtomic(h.path(fileShim), h.rec); err != nil {
		return err
	}
	p, err := proc.Start(ctx, proc.Spec{
		Path: argv[0], Args: argv[1:], Dir: h.info.ws.codeDir(), Env: env,
		Detach: true, StateDir: h.stateDir, Supervisor: r.cfg.ShimCommand,
	})
	if err != nil {
		return err
	}
	h.proc, h.launched = p, true
	h.rec.ShimPID = p.SupervisorPid()
	// The watcher is not tracked by Close: the process deliberately
	// outlives the runner.
	go func() {
		<-p.Done()
		poke()
	}()
	return writeJSONAtomic(h.path(fileShim), h.rec)
}

// terminate asks h's process to stop: SIGTERM to its whole process group,
// unless one was sent already (by this server or, before a restart, by an
// earlier one: a script in its SIGTERM handler is not signalled twice).
func (h *hostRun) terminate() {
	if h.done || h.termSent || h.proc == nil {
		return
	}
	h.termSent = true
	if at := h.proc.TermSentAt(); !at.IsZero() {
		h.termAt = at
		h.log.Info("SIGTERM was sent already; waiting for the grace period", "sent_at", at)
		return
	}
	if err := h.proc.Signal(syscall.SIGTERM); err != nil {
		h.log.Warn("sending SIGTERM failed", "err", err)
	}
	h.termAt = h.proc.TermSentAt()
	h.log.Info("sent SIGTERM", "pid", h.rec.ShimPID)
}

// kill SIGKILLs h's process group; the supervisor then records the signal.
func (h *hostRun) kill(now time.Time) {
	if h.done || !h.killedAt.IsZero() || h.proc == nil {
		return
	}
	h.killedAt = now
	_ = h.proc.Signal(syscall.SIGKILL)
	h.log.Warn("grace period over, sent SIGKILL", "pid", h.rec.ShimPID)
}
