package drivertest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const python = "/usr/bin/python3"

// TestPythonScript runs the generated train.py with Debian's python3, as a
// local driver's harness would, and checks it does what Script says.
func TestPythonScript(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("%s missing", python)
		}
		t.Skipf("%s missing", python)
	}
	dir := t.TempDir()
	train := filepath.Join(dir, "train.py")
	scripts := []Script{
		{Lines: []string{"a on " + HostToken, "ünï"}, ModelFiles: map[string]string{"m.txt": "M"}, Failure: "own", ExitCode: 3},
		{Lines: []string{"ready"}, Run: time.Minute, OnTerm: &OnTerm{Print: "term", ExitCode: 4, After: 100 * time.Millisecond}},
	}
	if err := os.WriteFile(train, []byte(PythonScript(scripts)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := func(host string) (*exec.Cmd, *syncBuffer, string) {
		root := filepath.Join(dir, host)
		for _, d := range []string{"model", "output"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		c := exec.Command(python, train)
		c.Env = append(os.Environ(), "SM_CURRENT_HOST="+host, "SM_MODEL_DIR="+filepath.Join(root, "model"), "SM_OUTPUT_DIR="+filepath.Join(root, "output"))
		out := &syncBuffer{}
		c.Stdout, c.Stderr = out, out
		return c, out, root
	}

	c, out, root := cmd("algo-1")
	var exit *exec.ExitError
	if err := c.Run(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("algo-1: %v; want exit code 3; output %q", err, out.String())
	}
	if got := out.String(); got != "a on algo-1\nünï\n" {
		t.Errorf("algo-1 output %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "model", "m.txt")); string(b) != "M" {
		t.Errorf("model file %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "output", "failure")); string(b) != "own" {
		t.Errorf("failure file %q", b)
	}

	c, out, _ = cmd("algo-2")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); out.String() != "ready\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("algo-2 never ready; output %q", out.String())
		}
	}
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 4 {
		t.Fatalf("algo-2 after SIGTERM: %v; want exit code 4; output %q", err, out.String())
	}
	if got := out.String(); got != "ready\nterm\n" {
		t.Errorf("algo-2 output %q", got)
	}

	c, out, _ = cmd("algo-3") // no script: exits 0 at once
	if err := c.Run(); err != nil || strings.TrimSpace(out.String()) != "" {
		t.Errorf("algo-3: %v, output %q", err, out.String())
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
