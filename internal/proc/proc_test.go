package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// modes are the ways an attached process runs: under the supervisor, and
// directly (no Spec.Supervisor).
var modes = []struct {
	name string
	sup  func() []string
}{
	{"supervised", supervisorArgv},
	{"direct", func() []string { return nil }},
}

func startT(t *testing.T, s Spec) *Handle {
	t.Helper()
	h, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, h)
	return h
}

func resultWithin(t *testing.T, h *Handle, d time.Duration) Result {
	t.Helper()
	select {
	case <-h.Done():
		return h.Result()
	case <-time.After(d):
		t.Fatalf("the process did not end within %s", d)
		return Result{}
	}
}

func TestExitCodeTailAndSink(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var got lineSink
			path, args := sh(`for i in 1 2 3 4 5; do echo "err $i" >&2; done; printf 'out 1\nout 2\r\nno newline'; exit 3`)
			h := startT(t, Spec{Path: path, Args: args, Supervisor: m.sup(), Sink: got.sink, TailLines: 3})
			r := resultWithin(t, h, 10*time.Second)
			if r.ExitCode != 3 || r.Signal != "" || r.Err != nil || r.Killed || r.OOMKilled {
				t.Errorf("result %+v, want exit code 3", r)
			}
			if r.String() != "exited with code 3" {
				t.Errorf("String() = %q", r.String())
			}
			if want := []string{"out 1", "out 2", "no newline"}; !slices.Equal(got.get("stdout"), want) {
				t.Errorf("stdout lines %q, want %q", got.get("stdout"), want)
			}
			if want := []string{"err 1", "err 2", "err 3", "err 4", "err 5"}; !slices.Equal(got.get("stderr"), want) {
				t.Errorf("stderr lines %q, want %q", got.get("stderr"), want)
			}
			if want := []string{"err 3", "err 4", "err 5"}; !slices.Equal(h.Tail(10), want) {
				t.Errorf("Tail(10) = %q, want %q (TailLines 3)", h.Tail(10), want)
			}
			if want := []string{"err 5"}; !slices.Equal(h.Tail(1), want) {
				t.Errorf("Tail(1) = %q, want %q", h.Tail(1), want)
			}
		})
	}
}

func TestSignalResult(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			path, args := sh(`echo $$ > ` + dir + `/pid; kill -USR1 $$; sleep 100`)
			h := startT(t, Spec{Path: path, Args: args, Supervisor: m.sup()})
			r := resultWithin(t, h, 10*time.Second)
			if r.Signal != "SIGUSR1" || r.ExitCode != 128+int(syscall.SIGUSR1) || r.Killed {
				t.Errorf("result %+v, want SIGUSR1 (exit %d)", r, 128+int(syscall.SIGUSR1))
			}
			if r.String() != "was killed by signal SIGUSR1" {
				t.Errorf("String() = %q", r.String())
			}
		})
	}
}

// A signal through the Handle reaches a grandchild in the group, not only
// the command.
func TestSignalReachesTheGroup(t *testing.T) {
	run := func(t *testing.T, s Spec, dir string) {
		h := startT(t, s)
		grandchild := readPid(t, filepath.Join(dir, "gc"))
		if grandchild.PID == h.Pid() {
			t.Fatal("the grandchild is the command")
		}
		if err := h.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the grandchild's trap", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "got"))
			return strings.Contains(string(b), "USR1")
		})
		select {
		case <-h.Done():
			t.Fatalf("the command ended on SIGUSR1, which it traps: %s", h.Result())
		default:
		}
	}
	// The command traps USR1 and lives on; its background child (same
	// group) writes a file when USR1 reaches it. The child writes its pid
	// once its trap is set.
	script := func(dir string) (string, []string) {
		return sh(`trap ':' USR1
sh -c 'trap "echo USR1 > ` + dir + `/got; exit 0" USR1; echo $$ > ` + dir + `/gc; while :; do sleep 0.02; done' &
while :; do sleep 0.02; done`)
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			path, args := script(dir)
			run(t, Spec{Path: path, Args: args, Supervisor: m.sup()}, dir)
		})
	}
	t.Run("detached", func(t *testing.T) {
		dir := t.TempDir()
		path, args := script(dir)
		run(t, Spec{Path: path, Args: args, Detach: true, StateDir: filepath.Join(dir, "state"), Supervisor: supervisorArgv()}, dir)
	})
}

// Stop sends SIGTERM, and SIGKILL once grace has passed, to a process that
// ignores SIGTERM; one that does not ends on the SIGTERM.
func TestStopGraceThenKill(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			path, args := sh(`trap '' TERM; echo $$ > ` + dir + `/pid; sleep 100`)
			h := startT(t, Spec{Path: path, Args: args, Supervisor: m.sup()})
			readPid(t, filepath.Join(dir, "pid"))
			const grace = 400 * time.Millisecond
			began := time.Now()
			r, err := h.Stop(context.Background(), grace)
			took := time.Since(began)
			if err != nil {
				t.Fatal(err)
			}
			if r.Signal != "SIGKILL" || r.ExitCode != 137 || !r.Killed || r.OOMKilled {
				t.Errorf("result %+v, want SIGKILL sent by us", r)
			}
			if r.String() != "was killed (SIGKILL)" {
				t.Errorf("String() = %q", r.String())
			}
			if took < grace || took > grace+5*time.Second {
				t.Errorf("Stop took %s with a grace of %s", took, grace)
			}
			if at := h.TermSentAt(); at.IsZero() || at.Before(began) || at.After(began.Add(grace)) {
				t.Errorf("TermSentAt %v, want the SIGTERM just after %v", at, began)
			}

			path, args = sh(`sleep 100`)
			h = startT(t, Spec{Path: path, Args: args, Supervisor: m.sup()})
			r, err = h.Stop(context.Background(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r.Signal != "SIGTERM" || r.Killed {
				t.Errorf("result %+v, want SIGTERM", r)
			}
		})
	}
}

// Stop returns ctx's error when ctx ends before the process does.
func TestStopContext(t *testing.T) {
	dir := t.TempDir()
	path, args := sh(`trap '' TERM; echo $$ > ` + dir + `/pid; sleep 100`)
	h := startT(t, Spec{Path: path, Args: args, Supervisor: supervisorArgv()})
	readPid(t, filepath.Join(dir, "pid"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.Stop(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop: %v, want the context's deadline", err)
	}
}

func TestCommandNotFound(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h, err := Start(context.Background(), Spec{Path: "/nonexistent/program", Supervisor: m.sup()})
			if err == nil {
				r := resultWithin(t, h, 10*time.Second)
				t.Fatalf("started a program that does not exist: %+v", r)
			}
		})
	}
	t.Run("detached", func(t *testing.T) {
		state := t.TempDir()
		h, err := Start(context.Background(), Spec{Path: "/nonexistent/program", Detach: true, StateDir: state, Supervisor: supervisorArgv()})
		if err != nil {
			t.Fatal(err)
		}
		r := resultWithin(t, h, 10*time.Second)
		if r.Err == nil || r.ExitCode != 127 || errors.Is(r.Err, ErrLost) {
			t.Errorf("result %+v, want exit 127 and the start error", r)
		}
	})
}

// The attached subtree, a setsid() daemon included, dies with the parent
// when the parent is SIGKILLed, and the supervisor removes the parent's
// RemoveOnParentDeath paths.
func TestAttachedSubtreeDiesWithParent(t *testing.T) {
	dir := t.TempDir()
	path, args := sh(`sleep 100 & echo $! > ` + dir + `/child
setsid sleep 100 & echo $! > ` + dir + `/daemon
wait`)
	tmp := filepath.Join(dir, "parent-tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	parent, line := runHelper(t, append([]string{"attach-parent", tmp, "--", path}, args...)...)
	f := strings.Fields(line)
	cmdPid, _ := strconv.Atoi(f[0])
	supPid, _ := strconv.Atoi(f[1])
	cmdID, supID := ident(cmdPid), ident(supPid)
	child, daemon := readPid(t, filepath.Join(dir, "child")), readPid(t, filepath.Join(dir, "daemon"))
	killAtEnd(t, &cmdID, &supID, &child, &daemon)
	waitFor(t, 10*time.Second, "the daemon's own session", func() bool {
		st, err := readStat(daemon.PID)
		return err == nil && st.pgid == daemon.PID
	})

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for name, id := range map[string]identity{"supervisor": supID, "command": cmdID, "child": child, "setsid daemon": daemon} {
		waitFor(t, 5*time.Second, name+" to die with its parent", func() bool { return !id.alive() })
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the parent's temporary directory is still there (%v)", err)
	}
}

// A clean Stop of an attached process leaves nothing of its subtree, a
// setsid() daemon included.
func TestAttachedStopKillsSubtree(t *testing.T) {
	dir := t.TempDir()
	path, args := sh(`sleep 100 & echo $! > ` + dir + `/child
setsid sleep 100 & echo $! > ` + dir + `/daemon
wait`)
	h := startT(t, Spec{Path: path, Args: args, Supervisor: supervisorArgv(), RemoveOnParentDeath: []string{dir}})
	child, daemon := readPid(t, filepath.Join(dir, "child")), readPid(t, filepath.Join(dir, "daemon"))
	killAtEnd(t, &child, &daemon)
	r, err := h.Stop(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Signal != "SIGTERM" {
		t.Errorf("result %+v, want SIGTERM", r)
	}
	// Once Stop has returned, not a moment later.
	if child.alive() || daemon.alive() {
		t.Errorf("after Stop: child alive %v, setsid daemon alive %v", child.alive(), daemon.alive())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("RemoveOnParentDeath removed %s although the parent lives: %v", dir, err)
	}
}

// Even when the command exits on its own, what it left running is killed.
func TestAttachedExitKillsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path, args := sh(`setsid sleep 100 & echo $! > ` + dir + `/daemon; sleep 0.3; exit 0`)
	h := startT(t, Spec{Path: path, Args: args, Supervisor: supervisorArgv()})
	daemon := readPid(t, filepath.Join(dir, "daemon"))
	killAtEnd(t, &daemon)
	if r := resultWithin(t, h, 10*time.Second); r.ExitCode != 0 || r.Err != nil {
		t.Errorf("result %+v", r)
	}
	if daemon.alive() {
		t.Error("the setsid daemon outlived the command")
	}
}

// The supervisor's status pipe (its fd 3) is not handed to the command:
// the command could otherwise write a forged exit line, and a daemon
// holding it would keep the pipe open.
func TestStatusPipeNotInherited(t *testing.T) {
	var got lineSink
	path, args := sh(`if { true >&3; } 2>/dev/null; then echo fd3-open; else echo fd3-closed; fi`)
	h := startT(t, Spec{Path: path, Args: args, Supervisor: supervisorArgv(), Sink: got.sink})
	resultWithin(t, h, 10*time.Second)
	if out := got.get("stdout"); !slices.Equal(out, []string{"fd3-closed"}) {
		t.Errorf("the command says %q, want fd3-closed", out)
	}
}

func TestRingAndJoinTail(t *testing.T) {
	r := newRing(3)
	if got := r.last(5); len(got) != 0 {
		t.Fatalf("empty ring: %q", got)
	}
	for _, l := range []string{"a", "b", "c", "d"} {
		r.add(l)
	}
	if got := JoinTail(r.last(5), 100); got != "b\nc\nd" {
		t.Fatalf("last(5) = %q", got)
	}
	if got := JoinTail(r.last(2), 100); got != "c\nd" {
		t.Fatalf("last(2) = %q", got)
	}
	if got := JoinTail(r.last(3), 3); got != "…c\nd" {
		t.Fatalf("cut = %q", got)
	}
}
