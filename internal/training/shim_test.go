package training

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTestShim runs the shim (this test binary, see TestMain) on argv.
func startTestShim(t *testing.T, dir string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"exec-shim", "--dir", dir, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var c childRecord
		if readJSON(filepath.Join(dir, fileChild), &c) == nil {
			_ = syscall.Kill(-c.PGID, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !exists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestShim(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		signal   syscall.Signal // sent to the shim once the child runs
		killPG   bool           // SIGKILL the child's group instead
		code     int
		sig      string
		output   []string
		shimCode int
	}{
		{name: "exit code and combined output", argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, code: 3, output: []string{"out", "err"}, shimCode: 3},
		{name: "success", argv: []string{"/bin/sh", "-c", "echo ok"}, code: 0, output: []string{"ok"}},
		{name: "SIGTERM reaches the whole group and its handler",
			argv:   []string{"/bin/sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo ready; sleep 30 & wait`},
			signal: syscall.SIGTERM, code: 0, output: []string{"ready", "got TERM"}},
		{name: "SIGKILL is recorded",
			argv:   []string{"/bin/sh", "-c", "echo ready; exec sleep 30"},
			killPG: true, code: 137, sig: "SIGKILL", shimCode: 137},
		{name: "command not found", argv: []string{"/no/such/binary"}, code: 127, shimCode: 127, output: []string{"sagebox: cannot start /no/such/binary"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := startTestShim(t, dir, tt.argv...)
			if tt.signal != 0 || tt.killPG {
				waitFile(t, filepath.Join(dir, fileChild), 5*time.Second)
				deadline := time.Now().Add(5 * time.Second)
				for {
					b, _ := os.ReadFile(filepath.Join(dir, fileOutput))
					if strings.Contains(string(b), "ready") || time.Now().After(deadline) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if tt.killPG {
					var c childRecord
					if err := readJSON(filepath.Join(dir, fileChild), &c); err != nil {
						t.Fatal(err)
					}
					syscall.Kill(-c.PGID, syscall.SIGKILL)
				} else {
					cmd.Process.Signal(tt.signal)
				}
			}
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tt.shimCode {
				t.Errorf("shim exit code %d, want %d", code, tt.shimCode)
			}
			var st exitStatus
			if err := readJSON(filepath.Join(dir, fileExit), &st); err != nil {
				t.Fatalf("exit.json: %v", err)
			}
			if st.ExitCode != tt.code || st.Signal != tt.sig {
				t.Errorf("exit.json = %+v, want code %d signal %q", st, tt.code, tt.sig)
			}
			out, _ := os.ReadFile(filepath.Join(dir, fileOutput))
			for _, want := range tt.output {
				if !strings.Contains(string(out), want) {
					t.Errorf("output.log lacks %q:\n%s", want, out)
				}
			}
			var c childRecord
			if readJSON(filepath.Join(dir, fileChild), &c) == nil {
				// Killed grandchildren are zombies until init reaps them.
				deadline := time.Now().Add(3 * time.Second)
				for groupAlive(c.PGID) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if groupAlive(c.PGID) {
					t.Errorf("process group %d outlived the shim", c.PGID)
				}
			}
		})
	}
}

func TestShimUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--dir", t.TempDir()}, {"--", "true"}, {"--bogus"}} {
		if code := RunShim(t.Context(), args); code != 2 {
			t.Errorf("RunShim(%q) = %d, want 2", args, code)
		}
	}
}
