package toolkit

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// EntryKind is the toolkit's entry point type (TK _entry_point_type.py),
// checked in this order: a .sh name is a command; a setup.py in code/ makes
// a package; a .py name is a program; anything else is a command.
type EntryKind uint8

// The entry point kinds.
const (
	EntryProgram EntryKind = iota // python <entry> args
	EntryPackage                  // pip install . ; python -m <module> args
	EntryCommand                  // /bin/sh -c "./<entry> <quoted args>"
)

// EntryKindOf is the kind of entry point entry, with the user's code in
// codeDir.
func EntryKindOf(entry, codeDir string) EntryKind {
	switch {
	case strings.HasSuffix(entry, ".sh"):
		return EntryCommand
	case pathExists(filepath.Join(codeDir, "setup.py")):
		return EntryPackage
	case strings.HasSuffix(entry, ".py"):
		return EntryProgram
	}
	return EntryCommand
}

// Command is the argv of host h's process, without the shim. passive means
// the host runs nothing of its own (an MPI worker: mpirun on algo-1 starts
// every rank on this machine). names is how host names resolve: with
// NamesOwnAddress torchrun's master is algo-1 and mpirun's host list
// names algo-1 (whose host name it is), as on SageMaker; otherwise both
// use 127.0.0.1.
func (s *Spec) Command(kind EntryKind, python string, h Host, names Names, masterPort int, stateDir string) (argv []string, passive bool, err error) {
	master := "127.0.0.1"
	if names == NamesOwnAddress {
		master = s.MasterAddr(names)
	}
	args := toCmdArgs(s.UserHyperParameters)
	var base []string
	switch kind {
	case EntryProgram:
		base = append([]string{python, s.EntryPoint}, args...)
	case EntryPackage:
		base = append([]string{python, "-m", s.ModuleName}, args...)
	case EntryCommand:
		line := "./" + s.EntryPoint
		if len(args) > 0 {
			line += " " + ShellJoin(args)
		}
		base = []string{"/bin/sh", "-c", line}
	}
	nproc := s.ProcsPerHost
	if nproc == 0 {
		nproc = max(h.NumGPUs, 1)
	}
	switch s.Dist {
	case DistTorch:
		if kind != EntryProgram {
			return nil, false, ClientErrorf("torch_distributed needs a Python script as entry point (a .py file, and no setup.py); got %s", s.EntryPoint)
		}
		argv = []string{python, "-m", "torch.distributed.run",
			"--nnodes", strconv.Itoa(len(s.Hosts)), "--nproc_per_node", strconv.Itoa(nproc),
			"--master_addr", master, "--master_port", strconv.Itoa(masterPort),
			"--node_rank", strconv.Itoa(h.Index),
			"--log_dir", filepath.Join(stateDir, "torchrun"),
			// Debian's torchrun 1.13 crashes in to_map unless --redirects
			// and --tee name a single stream: Std.from_str looks the value
			// up by iterating the IntFlag, and under Python 3.11 that
			// yields only OUT (1) and ERR (2), so "0" and "3" become None.
			// Stderr is redirected and teed (with torchrun's "[defaultN]:"
			// tag); stdout goes straight to output.log, untagged.
			"--redirects", "2", "--tee", "2",
			// The agent notices its workers' end on its monitor tick (5 s
			// by default): every job would end 0-5 s after its script.
			"--monitor_interval", "1",
		}
		return append(append(argv, s.EntryPoint), args...), false, nil
	case DistMPI:
		mpirun, err := exec.LookPath("mpirun")
		if err != nil {
			return nil, false, ClientErrorf("distribution %s runs the job with mpirun, which is not installed on this machine (install Open MPI, or use torch_distributed)", s.DistName)
		}
		if h.Index != 0 {
			return nil, true, nil
		}
		// Every rank runs on this machine, started by one mpirun on algo-1
		// (the toolkit's MasterRunner, minus ssh). No --tag-output: Open
		// MPI tags each write, and unbuffered Python writes a print in
		// pieces, which garbles lines and defeats metric regexes.
		np := nproc * len(s.Hosts)
		argv = []string{mpirun, "--allow-run-as-root", "--oversubscribe",
			"--host", master + ":" + strconv.Itoa(np), "-np", strconv.Itoa(np)}
		argv = append(argv, strings.Fields(s.MPIOptions)...)
		return append(argv, base...), false, nil
	}
	return base, false, nil
}

// FreePort returns 7777 (the toolkit's MASTER_PORT) when it is free on
// loopback and not taken, else a free port the kernel picks that is not
// taken (taken: ports already handed to other jobs, which may not be
// listening yet).
func FreePort(taken func(int) bool) int {
	if !taken(7777) {
		if l, err := net.Listen("tcp", "127.0.0.1:7777"); err == nil {
			l.Close()
			return 7777
		}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			break
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !taken(port) {
			return port
		}
	}
	return 7777
}

func pathExists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
