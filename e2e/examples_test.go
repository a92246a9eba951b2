package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// Helpers the tests of examples/ share: running an example's Python script
// as a long-lived process and reading the address it prints.

// pyProcess is an example's Python script running in the background.
type pyProcess struct {
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan error
}

// startPython runs /usr/bin/python3 with args in the repository root, and
// waits until a stdout line starts with prefix; it returns the process and
// the rest of that line. The process is killed when the test ends.
func startPython(t *testing.T, env []string, prefix string, wait time.Duration, args ...string) (*pyProcess, string) {
	t.Helper()
	p := &pyProcess{log: &lockedBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command("/usr/bin/python3", args...)
	p.cmd.Dir = repoRoot(t)
	p.cmd.Env = append(append(os.Environ(), "PYTHONUNBUFFERED=1"), env...)
	p.cmd.Stderr = p.log
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.log.Write([]byte(line + "\n"))
			if !sent && strings.HasPrefix(line, prefix) {
				found <- strings.TrimPrefix(line, prefix)
				sent = true
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(args[0]), p.log.String())
		}
	})
	select {
	case rest := <-found:
		return p, rest
	case err := <-p.exited:
		t.Fatalf("%v exited (%v) before printing %q:\n%s", args, err, prefix, p.log.String())
	case <-time.After(wait):
		t.Fatalf("%v printed no %q within %v:\n%s", args, prefix, wait, p.log.String())
	}
	return nil, ""
}

// stop sends SIGTERM and waits for the exit status.
func (p *pyProcess) stop(t *testing.T, wait time.Duration) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(wait):
		t.Fatalf("still running %v after SIGTERM:\n%s", wait, p.log.String())
	}
	return nil
}

// runPython runs an example's script to completion and returns its output.
func runPython(ctx context.Context, t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// checkNoHosting fails the test when the server still lists an endpoint,
// endpoint config or model 10 s after the example ended: each example
// deletes what it deployed (an endpoint is Deleting for a moment first).
func (s *server) checkNoHosting(ctx context.Context, t *testing.T) {
	t.Helper()
	sm := s.sm()
	deadline := time.Now().Add(10 * time.Second)
	for {
		eps, err := sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{})
		if err != nil {
			t.Fatal(err)
		}
		cfgs, err := sm.ListEndpointConfigs(ctx, &sagemaker.ListEndpointConfigsInput{})
		if err != nil {
			t.Fatal(err)
		}
		models, err := sm.ListModels(ctx, &sagemaker.ListModelsInput{})
		if err != nil {
			t.Fatal(err)
		}
		n := len(eps.Endpoints) + len(cfgs.EndpointConfigs) + len(models.Models)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind: %d endpoints, %d endpoint configs, %d models", len(eps.Endpoints), len(cfgs.EndpointConfigs), len(models.Models))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
