package proc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/statefile"
)

func adoptT(t *testing.T, dir string) *Handle {
	t.Helper()
	h, err := Adopt(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A detached process outlives the parent that started it (which exits at
// once), is re-adopted from its state directory, stopped through the
// adopted handle, and its exit is then read from the state directory.
func TestDetachedSurvivesParentAndIsAdopted(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	path, args := sh(`echo $$ > ` + dir + `/pid; echo started; while :; do sleep 0.05; done`)
	parent, line := runHelper(t, append([]string{"detach-parent", state, "--", path}, args...)...)
	if err := parent.Wait(); err != nil {
		t.Fatalf("the parent: %v", err)
	}
	supPid, _ := strconv.Atoi(line)
	sup := ident(supPid)
	cmd := readPid(t, filepath.Join(dir, "pid"))
	killAtEnd(t, &cmd, &sup)
	if !sup.alive() {
		t.Fatal("the supervisor died with its parent")
	}

	h := adoptT(t, state)
	stopAtEnd(t, h)
	// The command can print its pid before the supervisor has recorded it.
	waitFor(t, 5*time.Second, "child.json", func() bool { return h.Pid() != 0 })
	if !h.Adopted() || h.SupervisorPid() != supPid || h.Pid() != cmd.PID {
		t.Errorf("adopted: %v, supervisor %d (want %d), pid %d (want %d)", h.Adopted(), h.SupervisorPid(), supPid, h.Pid(), cmd.PID)
	}
	select {
	case <-h.Done():
		t.Fatalf("the adopted handle says the process ended: %s", h.Result())
	case <-time.After(300 * time.Millisecond):
	}
	if !cmd.alive() {
		t.Fatal("the command is gone")
	}
	waitFor(t, 5*time.Second, "output.log", func() bool { return slices.Equal(h.Tail(5), []string{"started"}) })

	r, err := h.Stop(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Signal != "SIGTERM" || r.Err != nil || r.ExitCode != 143 {
		t.Errorf("result %+v, want SIGTERM", r)
	}
	waitFor(t, 5*time.Second, "the supervisor to exit", func() bool { return !sup.alive() && !cmd.alive() })

	// Adopted again, it is over: the result comes from exit.json.
	h2 := adoptT(t, state)
	r2 := resultWithin(t, h2, time.Second)
	if r2.Signal != "SIGTERM" || r2.Err != nil || !r2.EndedAt.Equal(r.EndedAt) {
		t.Errorf("re-adopted result %+v, want %+v", r2, r)
	}
}

// A detached process's exit code and output, through the handle that
// started it.
func TestDetachedExitAndOutput(t *testing.T) {
	state := t.TempDir()
	path, args := sh(`echo one; echo two >&2; exit 7`)
	h := startT(t, Spec{Path: path, Args: args, Detach: true, StateDir: state, Supervisor: supervisorArgv()})
	r := resultWithin(t, h, 10*time.Second)
	if r.ExitCode != 7 || r.Err != nil || r.Signal != "" {
		t.Errorf("result %+v, want exit code 7", r)
	}
	if got := h.Tail(10); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("Tail = %q", got)
	}
	if _, err := Start(context.Background(), Spec{Path: path, Args: args, Detach: true, StateDir: state, Supervisor: supervisorArgv(), Sink: func(string, []byte) {}}); err == nil {
		t.Error("a detached Start with a Sink was accepted")
	}
}

// A state directory whose supervisor and command pids now belong to
// another program (same pid, another start time) is never signalled: the
// handle ends at once with ErrLost and the other program lives on.
func TestAdoptRefusesReusedPid(t *testing.T) {
	state := t.TempDir()
	path, args := sh(`exit 0`)
	h := startT(t, Spec{Path: path, Args: args, Detach: true, StateDir: state, Supervisor: supervisorArgv()})
	resultWithin(t, h, 10*time.Second)

	// The "other program": a live process that is not the one recorded.
	// In a group of its own, like the recorded command was: a signal to
	// the recorded group would reach it.
	other := exec.Command("sleep", "100")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	real := ident(other.Process.Pid)
	stale := identity{PID: real.PID, Start: real.Start - 1}
	var in intentRecord
	if err := statefile.ReadJSON(filepath.Join(state, fileIntent), &in); err != nil {
		t.Fatal(err)
	}
	writeState(t, state, fileSupervisor, supervisorRecord{identity: stale, Run: in.Run})
	writeState(t, state, fileChild, childRecord{PID: stale.PID, PGID: stale.PID, Start: stale.Start})
	if err := os.Remove(filepath.Join(state, fileExit)); err != nil {
		t.Fatal(err)
	}

	a := adoptT(t, state)
	r := resultWithin(t, a, 5*time.Second)
	if !errors.Is(r.Err, ErrLost) {
		t.Errorf("result %+v, want ErrLost", r)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := a.Signal(sig); err != nil {
			t.Errorf("Signal(%v): %v", sig, err)
		}
	}
	if _, err := a.Stop(context.Background(), 0); err != nil {
		t.Error(err)
	}
	time.Sleep(100 * time.Millisecond) // a signal, had one been sent, has landed
	if !real.alive() {
		t.Fatal("the other program that now has the recorded pid was killed")
	}

	// Legacy state (no run id, no start times) naming a pid whose command
	// line does not name the state directory: the same.
	l := AdoptLegacy(state, real.PID)
	if r := resultWithin(t, l, 5*time.Second); !errors.Is(r.Err, ErrLost) {
		t.Errorf("legacy result %+v, want ErrLost", r)
	}
	if !real.alive() {
		t.Fatal("AdoptLegacy killed another program")
	}
}

// The identity check itself: a live pid with another start time is not
// the recorded process.
func TestIdentity(t *testing.T) {
	me := ident(os.Getpid())
	if !me.alive() {
		t.Fatal("this process is not alive by its own identity")
	}
	if (identity{PID: me.PID, Start: me.Start + 1}).alive() {
		t.Error("another start time counts as the same process")
	}
	if (identity{PID: me.PID}).alive() {
		t.Error("an identity without a start time counts as alive")
	}
}

func writeState(t *testing.T, dir, name string, v any) {
	t.Helper()
	if err := statefile.WriteJSON(filepath.Join(dir, name), v); err != nil {
		t.Fatal(err)
	}
}

func TestAdoptCorruptState(t *testing.T) {
	good := func(t *testing.T) string {
		dir := t.TempDir()
		writeState(t, dir, fileIntent, intentRecord{Run: "r1", Argv: []string{"x"}, StartedAt: time.Now()})
		return dir
	}
	for name, corrupt := range map[string]func(t *testing.T, dir string){
		"intent not JSON": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, fileIntent), []byte("{\"run\": "), 0o644)
		},
		"intent without run id": func(t *testing.T, dir string) {
			writeState(t, dir, fileIntent, intentRecord{Argv: []string{"x"}})
		},
		"supervisor not JSON": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, fileSupervisor), []byte("\x00\x01garbage"), 0o644)
		},
		"supervisor of another run": func(t *testing.T, dir string) {
			writeState(t, dir, fileSupervisor, supervisorRecord{identity: ident(os.Getpid()), Run: "r0"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := good(t)
			corrupt(t, dir)
			h, err := Adopt(context.Background(), dir)
			if !errors.Is(err, ErrCorrupt) || h != nil {
				t.Errorf("Adopt: %v, want ErrCorrupt", err)
			}
			if err != nil && !strings.Contains(err.Error(), dir) {
				t.Errorf("the error %q does not name the state directory", err)
			}
		})
	}
}

func TestAdoptNotStarted(t *testing.T) {
	if _, err := Adopt(context.Background(), t.TempDir()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("empty dir: %v, want ErrNotStarted", err)
	}
	// An intent whose supervisor never recorded itself (the parent died
	// between the two): nothing ran. Adopt waits adoptWait for it first.
	dir := t.TempDir()
	writeState(t, dir, fileIntent, intentRecord{Run: "r1", Argv: []string{"x"}, StartedAt: time.Now()})
	began := time.Now()
	if _, err := Adopt(context.Background(), dir); !errors.Is(err, ErrNotStarted) {
		t.Errorf("intent only: %v, want ErrNotStarted", err)
	}
	if took := time.Since(began); took < adoptWait {
		t.Errorf("gave up after %s, before adoptWait (%s)", took, adoptWait)
	}
}

// The first SIGTERM is recorded in the state directory: a re-adopted
// handle knows it was sent, and its Stop does not send a second one; it
// only keeps the SIGKILL deadline counted from the first.
func TestTermSentAtSurvivesAdoption(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	path, args := sh(`trap 'echo TERM >> ` + dir + `/terms' TERM; echo $$ > ` + dir + `/pid; while :; do sleep 0.02; done`)
	h := startT(t, Spec{Path: path, Args: args, Detach: true, StateDir: state, Supervisor: supervisorArgv()})
	readPid(t, filepath.Join(dir, "pid"))
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := h.TermSentAt()
	waitFor(t, 5*time.Second, "the trap", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "terms"))
		return len(b) > 0
	})
	var tr termRecord
	if b, err := os.ReadFile(termPath(state)); err != nil || json.Unmarshal(b, &tr) != nil || !tr.At.Equal(sent) {
		t.Fatalf("term.json: %s (%v), want the time %v", b, err, sent)
	}

	a := adoptT(t, state)
	if !a.TermSentAt().Equal(sent) {
		t.Fatalf("adopted TermSentAt %v, want %v", a.TermSentAt(), sent)
	}
	const grace = 700 * time.Millisecond
	r, err := a.Stop(context.Background(), grace)
	if err != nil {
		t.Fatal(err)
	}
	if r.Signal != "SIGKILL" || !r.Killed {
		t.Errorf("result %+v, want SIGKILL", r)
	}
	if took := time.Since(sent); took < grace || took > grace+5*time.Second {
		t.Errorf("killed %s after the first SIGTERM, want about %s", took, grace)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "terms"))
	if n := strings.Count(string(b), "TERM"); n != 1 {
		t.Errorf("the command got SIGTERM %d times, want once", n)
	}
}
