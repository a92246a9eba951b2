package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/statefile"
)

// SupervisorUsage is the supervisor's command line, after the subcommand
// that runs it (`sagebox exec-shim`).
const SupervisorUsage = "--dir STATE_DIR --run ID [--uid UID --gid GID] [--hosts-file PATH] [--hostname NAME] -- COMMAND [ARG...]  |  " +
	"--attached --parent PID [--remove-on-parent-death PATH]... [--uid UID --gid GID] [--hosts-file PATH] [--hostname NAME] -- COMMAND [ARG...]"

// exitRecord is exit.json, and the "exit" line of the attached status
// pipe.
type exitRecord struct {
	Run       string    `json:"run,omitempty"`
	ExitCode  int       `json:"exit_code"`
	Signal    string    `json:"signal"` // "SIGKILL", or "" for a normal exit
	OOMKilled bool      `json:"oom_killed,omitempty"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Error     string    `json:"error,omitempty"` // the command could not be started
}

// childRecord is child.json, and the "child" line of the status pipe.
type childRecord struct {
	PID   int    `json:"pid"`
	PGID  int    `json:"pgid"`
	Start uint64 `json:"start_ticks"`
}

// supervisorRecord is supervisor.json.
type supervisorRecord struct {
	identity
	Run string `json:"run"`
}

type supervisorArgs struct {
	dir, run string
	attached bool
	parent   int
	remove   []string // attached: removed after a parent-death kill
	cred     *syscall.Credential
	hosts    string // bind-mounted over /etc/hosts in the command's mount namespace
	hostname string // the command's host name, in a UTS namespace of its own
	argv     []string
}

// isolationArgs passes Spec.HostsFile and Spec.Hostname to the supervisor.
func isolationArgs(s Spec) []string {
	var out []string
	if s.HostsFile != "" {
		out = append(out, "--hosts-file", s.HostsFile)
	}
	if s.Hostname != "" {
		out = append(out, "--hostname", s.Hostname)
	}
	return out
}

// credentialArgs passes Spec.Credential to the supervisor.
func credentialArgs(c *syscall.Credential) []string {
	if c == nil {
		return nil
	}
	out := []string{"--uid", strconv.FormatUint(uint64(c.Uid), 10), "--gid", strconv.FormatUint(uint64(c.Gid), 10)}
	for _, g := range c.Groups {
		out = append(out, "--group", strconv.FormatUint(uint64(g), 10))
	}
	return out
}

func parseSupervisorArgs(args []string) (supervisorArgs, error) {
	var a supervisorArgs
	uidSet, gidSet := false, false
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "--dir" && i+1 < len(args):
			a.dir = args[i+1]
			i++
		case len(arg) > 6 && arg[:6] == "--dir=":
			a.dir = arg[6:]
		case arg == "--run" && i+1 < len(args):
			a.run = args[i+1]
			i++
		case arg == "--attached":
			a.attached = true
		case arg == "--parent" && i+1 < len(args):
			p, err := strconv.Atoi(args[i+1])
			if err != nil {
				return a, fmt.Errorf("--parent: %w", err)
			}
			a.parent = p
			i++
		case arg == "--hosts-file" && i+1 < len(args):
			a.hosts = args[i+1]
			i++
		case arg == "--hostname" && i+1 < len(args):
			a.hostname = args[i+1]
			i++
		case arg == "--remove-on-parent-death" && i+1 < len(args):
			a.remove = append(a.remove, args[i+1])
			i++
		case (arg == "--uid" || arg == "--gid" || arg == "--group") && i+1 < len(args):
			n, err := strconv.ParseUint(args[i+1], 10, 32)
			if err != nil {
				return a, fmt.Errorf("%s: %w", arg, err)
			}
			if a.cred == nil {
				a.cred = &syscall.Credential{}
			}
			switch arg {
			case "--uid":
				a.cred.Uid = uint32(n)
				uidSet = true
			case "--gid":
				a.cred.Gid = uint32(n)
				gidSet = true
			default:
				a.cred.Groups = append(a.cred.Groups, uint32(n))
			}
			i++
		case arg == "--":
			a.argv = args[i+1:]
			i = len(args)
		default:
			return a, fmt.Errorf("unexpected argument %q", arg)
		}
	}
	switch {
	case a.attached && a.dir != "":
		return a, errors.New("--attached and --dir exclude each other")
	case !a.attached && len(a.remove) > 0:
		return a, errors.New("--remove-on-parent-death needs --attached")
	case !a.attached && a.dir == "":
		return a, errors.New("--dir is required")
	case a.cred != nil && (!uidSet || !gidSet):
		return a, errors.New("--uid and --gid go together")
	case len(a.argv) == 0:
		return a, errors.New("no command after --")
	}
	return a, nil
}

// RunSupervisor is the supervisor's main (`sagebox exec-shim ARGS`): it
// runs the command in args (see SupervisorUsage) and returns the exit
// status for the supervisor process: the command's exit code, or
// 128+signal. ctx is deliberately not used to stop the command: a
// detached supervisor must outlive whoever started it, and signals are
// how it is stopped.
//
// Detached (--dir): it records itself in supervisor.json first, starts
// the command with output to output.log, forwards SIGTERM, SIGINT,
// SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the command's group, and writes
// exit.json. Attached (--attached): the command inherits the supervisor's
// stdout and stderr; its stdin is the lifeline, a pipe whose other end
// only the parent holds: end of file on it means the parent is gone, and
// the whole subtree is killed (then the --remove-on-parent-death paths
// are removed). Signals are forwarded; the command's pid and exit are
// reported on fd 3.
// Either way, once the command has exited everything left below the
// supervisor is killed before the exit is reported.
func RunSupervisor(ctx context.Context, args []string) int {
	// First, before anything can block: from now on a SIGTERM is handled,
	// never fatal to the supervisor.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	signal.Ignore(syscall.SIGPIPE)

	a, err := parseSupervisorArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
		fmt.Fprintln(os.Stderr, "usage: sagebox exec-shim", SupervisorUsage)
		return 2
	}
	s := &supervisor{a: a, sigs: sigs}
	return s.run(ctx)
}

type supervisor struct {
	a      supervisorArgs
	sigs   chan os.Signal
	status *os.File      // attached: fd 3
	orphan chan struct{} // attached: closed when the parent is gone
	start  time.Time
}

func (s *supervisor) fail(err error) int {
	fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
	return 2
}

func (s *supervisor) run(ctx context.Context) int {
	a := s.a
	if a.attached {
		// The status pipe is inherited without close-on-exec; the command
		// must not get it (it could write a forged exit line, and whatever
		// it forks would hold the pipe open).
		syscall.CloseOnExec(3)
		s.status = os.NewFile(3, "status")
		// Not PR_SET_PDEATHSIG: that fires when the parent's thread that
		// forked this process exits, which may happen while the parent
		// lives on (and does, first, when the parent is killed).
		s.orphan = make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(s.orphan)
		}()
		if a.parent > 0 && os.Getppid() != a.parent {
			return s.fail(errors.New("the parent died before the command started"))
		}
	} else {
		signal.Ignore(syscall.SIGHUP)
		_, _ = syscall.Setsid() // fails harmlessly when already a session leader
		// The record comes first: from here on a restarted parent can find
		// this process (Adopt), so nothing runs unrecorded.
		me := identity{PID: os.Getpid(), Start: startTime(os.Getpid())}
		if err := statefile.WriteJSON(filepath.Join(a.dir, fileSupervisor), supervisorRecord{identity: me, Run: a.run}); err != nil {
			return s.fail(err)
		}
	}
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim: cannot become a child subreaper; daemons the command starts may outlive it:", err)
	}
	s.start = time.Now()

	var stdout, stderr io.Writer = os.Stdout, os.Stderr
	if !a.attached {
		out, err := os.OpenFile(filepath.Join(a.dir, fileOutput), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return s.fail(err)
		}
		defer out.Close()
		stdout, stderr = out, out
		// A stop that arrived before the command started: do not start it.
		// (A caller's context canceled this early means the same.)
		select {
		case sig := <-s.sigs:
			ss := sig.(syscall.Signal)
			return s.finish(exitRecord{ExitCode: 128 + int(ss), Signal: signalName(ss)})
		case <-ctx.Done():
			return s.finish(exitRecord{ExitCode: 128 + int(syscall.SIGTERM), Signal: "SIGTERM"})
		default:
		}
	}

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return s.finish(exitRecord{ExitCode: 127, Error: err.Error()})
	}
	// The namespaces are entered on this goroutine's thread, which the
	// command is then forked from.
	if err := isolate(a.hosts, a.hostname); err != nil {
		err = fmt.Errorf("cannot give the command its own /etc/hosts and host name: %w", err)
		fmt.Fprintf(stderr, "sagebox: %v\n", err)
		return s.finish(exitRecord{ExitCode: 127, Error: err.Error()})
	}
	defer devnull.Close()
	cmd := exec.Command(a.argv[0], a.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, stdout, stderr
	cmd.SysProcAttr = childAttr()
	cmd.SysProcAttr.Credential = a.cred
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "sagebox: cannot start %s: %v\n", a.argv[0], err)
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return s.finish(exitRecord{ExitCode: code, Error: err.Error()})
	}
	pid := cmd.Process.Pid
	oomBefore := oomKills()
	child := childRecord{PID: pid, PGID: pid, Start: startTime(pid)}
	if a.attached {
		b, _ := json.Marshal(child)
		fmt.Fprintf(s.status, "child %s\n", b)
	} else if err := statefile.WriteJSON(filepath.Join(a.dir, fileChild), child); err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
	}

	// One reaper for every child: the command and whatever is re-parented
	// to this subreaper. Only the command's status matters.
	reaped := make(chan syscall.WaitStatus, 1)
	go func() {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: nothing left
			}
			if p == pid {
				reaped <- ws
			}
		}
	}()
	var ws syscall.WaitStatus
	orphaned := false
	orphan := s.orphan // nil (never ready) when detached
	for waiting := true; waiting; {
		select {
		case <-orphan:
			// The parent died: nothing of the command may outlive it.
			orphaned, orphan = true, nil
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		case sig := <-s.sigs:
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
		case ws = <-reaped:
			waiting = false
		}
	}
	// Like a container whose main process ended: nothing of it may linger
	// (workers a launcher left behind, daemons, background helpers).
	killTree(pid)
	if orphaned {
		for _, p := range a.remove {
			if err := os.RemoveAll(p); err != nil {
				fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
			}
		}
	}

	st := exitRecord{PID: pid}
	switch {
	case ws.Signaled():
		st.Signal = signalName(ws.Signal())
		st.ExitCode = 128 + int(ws.Signal())
		if ws.Signal() == syscall.SIGKILL && oomBefore >= 0 && oomKills() > oomBefore {
			st.OOMKilled = true
		}
	default:
		st.ExitCode = ws.ExitStatus()
	}
	return s.finish(st)
}

// killTree SIGKILLs group pgid and every process below this one, until
// none is left (each one killed re-parents its own children here), for at
// most 5 s.
func killTree(pgid int) {
	me := os.Getpid()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		kids := children(me)
		if len(kids) == 0 && !groupAlive(pgid) {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *supervisor) finish(st exitRecord) int {
	st.Run = s.a.run
	st.StartedAt, st.EndedAt = s.start, time.Now()
	if s.a.attached {
		b, _ := json.Marshal(st)
		fmt.Fprintf(s.status, "exit %s\n", b)
	} else if err := statefile.WriteJSON(filepath.Join(s.a.dir, fileExit), st); err != nil {
		fmt.Fprintln(os.Stderr, "sagebox exec-shim:", err)
		return 2
	}
	return st.ExitCode
}
