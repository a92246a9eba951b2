// Package e2e runs the real sagebox binary against real clients: the sagebox
// CLI, aws-sdk-go-v2, Debian's boto3 and AWS CLI, and real torch training
// scripts run by Debian's python3.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// binary is the sagebox binary built once for the package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sagebox-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "sagebox")
	cmd := exec.Command("go", "build", "-o", binary, "../cmd/sagebox")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sagebox:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the repository's root directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// requireTool skips (or, with SAGEBOX_STRICT_TOOLS=1, fails) when a tool the
// test drives is missing.
func requireTool(t testing.TB, name string, check ...string) {
	t.Helper()
	args := check
	if len(args) == 0 {
		args = []string{"--version"}
	}
	if err := exec.Command(name, args...).Run(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("%s is required (install it with `make deps`): %v", name, err)
		}
		t.Skipf("%s not available: %v", name, err)
	}
}

func requireTorch(t testing.TB) {
	t.Helper()
	requireTool(t, "/usr/bin/python3", "-c", "import torch, numpy")
}

// server is a running `sagebox server`.
type server struct {
	t       testing.TB
	cmd     *exec.Cmd
	addr    string
	URL     string
	dataDir string
	log     *bytes.Buffer
	extra   []string
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts a server on a fresh data dir and waits for health.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t), dataDir: t.TempDir(), extra: extra}
	s.URL = "http://" + s.addr
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.log = &bytes.Buffer{}
	args := append([]string{"server", "--addr", s.addr, "--data-dir", s.dataDir, "--stop-grace", "5s"}, s.extra...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Env = append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.URL + "/_sagebox/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("server did not become healthy; log:\n%s", s.log)
}

// kill ends the server with SIGKILL, as a crash would.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	if s.t.Failed() {
		s.t.Logf("server log:\n%s", s.log)
	}
}

// awsEnv is the environment AWS clients get in tests.
func (s *server) awsEnv() []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "SAGEBOX_ENDPOINT="+s.URL, "SAGEBOX_URL="+s.URL,
		"AWS_PAGER=",
	)
}

// sagebox runs the CLI and returns stdout, stderr and the exit code.
func (s *server) sagebox(ctx context.Context, args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = s.awsEnv()
	cmd.Dir = repoRoot(s.t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("run sagebox %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// python runs a Python script with Debian's python3 and boto3.
func (s *server) python(ctx context.Context, script string, args ...string) (string, error) {
	s.t.Helper()
	f := filepath.Join(s.t.TempDir(), "script.py")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", append([]string{f}, args...)...)
	cmd.Env = s.awsEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// awscli runs Debian's AWS CLI against the server.
func (s *server) awscli(ctx context.Context, args ...string) (string, error) {
	s.t.Helper()
	cmd := exec.CommandContext(ctx, "/usr/bin/aws", append([]string{"--endpoint-url", s.URL}, args...)...)
	cmd.Env = s.awsEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *server) sdkConfig() aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(s.URL),
	}
}

func (s *server) sm() *sagemaker.Client { return sagemaker.NewFromConfig(s.sdkConfig()) }

func (s *server) s3() *s3.Client {
	return s3.NewFromConfig(s.sdkConfig(), func(o *s3.Options) { o.UsePathStyle = true })
}

// waitJob polls DescribeTrainingJob until the job ends.
func (s *server) waitJob(ctx context.Context, name string) *sagemaker.DescribeTrainingJobOutput {
	s.t.Helper()
	for {
		d, err := s.sm().DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		if err != nil {
			s.t.Fatalf("describe %s: %v", name, err)
		}
		switch d.TrainingJobStatus {
		case "Completed", "Failed", "Stopped":
			return d
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("job %s still %s/%s when the test timed out", name, d.TrainingJobStatus, d.SecondaryStatus)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustContain(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

func execCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}
