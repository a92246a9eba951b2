package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The shim sits between the server and a host's process, so that the job
// survives the server:
//
//	sagebox exec-shim --dir <state dir> -- <argv...>
//
// It starts in a session of its own (the runner starts it with Setsid, and
// it tries setsid itself when run by hand), so a terminal's Ctrl-C or hang-up
// aimed at the server does not reach it. It starts argv in a new process
// group whose stdout and stderr are <state dir>/output.log opened for
// append: a file, not a pipe, so the server can die without the job getting
// SIGPIPE. It forwards SIGTERM and SIGINT to that whole group (the user
// script really receives SIGTERM), records the child in child.json, and when
// the child exits kills what is left of its group and writes exit.json
// atomically. The runner tails output.log and watches for exit.json; a
// restarted server finds both where it left them.

// State files in a host's state directory.
const (
	fileOutput = "output.log" // the process's stdout+stderr (shim)
	fileChild  = "child.json" // {"pid","pgid"} (shim)
	fileExit   = "exit.json"  // exitStatus (shim)
	fileShim   = "shim.json"  // launchRecord (runner)
	fileShimLg = "shim.log"   // the shim's own stderr (runner opens it)
	fileTail   = "tail.json"  // tailState (runner)
)

// exitStatus is exit.json.
type exitStatus struct {
	ExitCode  int       `json:"exit_code"`
	Signal    string    `json:"signal"` // "SIGKILL", or "" for a normal exit
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Error     string    `json:"error,omitempty"` // the process could not be started
}

// childRecord is child.json.
type childRecord struct {
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
}

// RunShim runs the shim with its command-line arguments (without the
// subcommand name) and returns the exit status for the shim process: the
// child's exit code, or 128+signal. ctx is deliberately not used to stop
// the child: the shim must outlive whoever started it, and signals are how
// it is stopped.
func RunShim(ctx context.Context, args []string) int {
	// First, before anything can block: a SIGTERM from now on is forwarded,
	// never fatal to the shim.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)

	dir, argv, err := parseShimArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
		fmt.Fprintln(os.Stderr, "usage: sagebox exec-shim --dir STATE_DIR -- COMMAND [ARG...]")
		return 2
	}
	_, _ = syscall.Setsid() // fails harmlessly when already a session or group leader

	out, err := os.OpenFile(filepath.Join(dir, fileOutput), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
		return 2
	}
	defer out.Close()
	started := time.Now()
	finish := func(st exitStatus) int {
		st.StartedAt, st.EndedAt = started, time.Now()
		if err := writeJSONAtomic(filepath.Join(dir, fileExit), st); err != nil {
			fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
			return 2
		}
		return st.ExitCode
	}

	// A stop that arrived before the child started: do not start it. (A
	// caller's context canceled this early means the same: sagebox's main
	// turns SIGTERM into a canceled context before RunShim listens.)
	select {
	case s := <-sigs:
		return finish(exitStatus{ExitCode: 128 + int(s.(syscall.Signal)), Signal: unix.SignalName(s.(syscall.Signal))})
	case <-ctx.Done():
		return finish(exitStatus{ExitCode: 128 + int(syscall.SIGTERM), Signal: "SIGTERM"})
	default:
	}

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return finish(exitStatus{ExitCode: 127, Error: err.Error()})
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(out, "sagebox: cannot start %s: %v\n", argv[0], err)
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return finish(exitStatus{ExitCode: code, Error: err.Error()})
	}
	pid := cmd.Process.Pid
	if err := writeJSONAtomic(filepath.Join(dir, fileChild), childRecord{PID: pid, PGID: pid}); err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for waiting := true; waiting; {
		select {
		case s := <-sigs:
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		case <-done:
			waiting = false
		}
	}
	// Like a container whose main process ended: nothing of the job may
	// linger (workers a launcher left behind, background helpers).
	_ = syscall.Kill(-pid, syscall.SIGKILL)

	st := exitStatus{PID: pid}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		st.Signal = unix.SignalName(ws.Signal())
		st.ExitCode = 128 + int(ws.Signal())
	default:
		st.ExitCode = ws.ExitStatus()
	}
	return finish(st)
}

func parseShimArgs(args []string) (dir string, argv []string, err error) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--dir" && i+1 < len(args):
			dir = args[i+1]
			i++
		case len(a) > 6 && a[:6] == "--dir=":
			dir = a[6:]
		case a == "--":
			argv = args[i+1:]
			i = len(args)
		default:
			return "", nil, fmt.Errorf("unexpected argument %q", a)
		}
	}
	if dir == "" {
		return "", nil, errors.New("--dir is required")
	}
	if len(argv) == 0 {
		return "", nil, errors.New("no command after --")
	}
	return dir, argv, nil
}
