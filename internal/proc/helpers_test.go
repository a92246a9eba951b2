package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary plays three parts besides running the tests (the
// helper-process pattern), chosen by its first argument:
//
//	exec-shim ARGS             the supervisor (RunSupervisor)
//	detach-parent DIR -- CMD   starts CMD detached from DIR, prints the supervisor's pid, exits
//	attach-parent DIR -- CMD   starts CMD attached under the supervisor (removing DIR if the parent dies), prints the command's and the supervisor's pid, blocks
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "exec-shim":
			os.Exit(RunSupervisor(context.Background(), os.Args[2:]))
		case "detach-parent":
			os.Exit(detachParent(os.Args[2], os.Args[4:]))
		case "attach-parent":
			os.Exit(attachParent(os.Args[2], os.Args[4:]))
		}
	}
	os.Exit(m.Run())
}

func supervisorArgv() []string { return []string{os.Args[0], "exec-shim"} }

func detachParent(dir string, argv []string) int {
	h, err := Start(context.Background(), Spec{Path: argv[0], Args: argv[1:], Detach: true, StateDir: dir, Supervisor: supervisorArgv()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(h.SupervisorPid())
	return 0
}

func attachParent(remove string, argv []string) int {
	h, err := Start(context.Background(), Spec{Path: argv[0], Args: argv[1:], Supervisor: supervisorArgv(), RemoveOnParentDeath: []string{remove}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(h.Pid(), h.SupervisorPid())
	<-h.Done()
	return 0
}

// runHelper starts the test binary in the part role and returns it with
// the first line it prints.
func runHelper(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper %v printed nothing: %v", args, err)
	}
	return cmd, strings.TrimSpace(line)
}

// sh runs script with /bin/sh -c.
func sh(script string) (string, []string) { return "/bin/sh", []string{"-c", script} }

// ident is pid's current identity (start time 0 when it is gone).
func ident(pid int) identity { return identity{PID: pid, Start: startTime(pid)} }

// waitFor polls cond every 10 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid waits for path to hold a pid and returns that process's identity.
func readPid(t *testing.T, path string) identity {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "a pid in "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	id := ident(pid)
	if id.Start == 0 {
		t.Fatalf("pid %d from %s is already gone", pid, path)
	}
	return id
}

// killAtEnd SIGKILLs the processes (by recorded identity) when the test
// ends, in case it failed half-way.
func killAtEnd(t *testing.T, ids ...*identity) {
	t.Cleanup(func() {
		for _, id := range ids {
			if id.alive() {
				_ = syscall.Kill(id.PID, syscall.SIGKILL)
			}
		}
	})
}

// stopAtEnd stops h when the test ends, in case it failed half-way.
func stopAtEnd(t *testing.T, h *Handle) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = h.Stop(ctx, 0)
	})
}

// lineSink collects what a Sink is given.
type lineSink struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (s *lineSink) sink(stream string, line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == nil {
		s.lines = map[string][]string{}
	}
	s.lines[stream] = append(s.lines[stream], string(line))
}

func (s *lineSink) get(stream string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines[stream]...)
}
