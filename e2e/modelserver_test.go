package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The model the training example produces, served by `sagebox model-server`
// from a model.tar.gz with the example's inference.py, as an endpoint would.
func TestModelServerServesTrainedDigits(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import sklearn")
	root := repoRoot(t)
	data := prepareDigits(t)
	model := filepath.Join(t.TempDir(), "model")
	train := exec.Command("/usr/bin/python3", filepath.Join(root, "examples/digits/train.py"), "--epochs", "15", "--lr", "0.05")
	train.Env = append(os.Environ(), "SM_MODEL_DIR="+model, "SM_CHANNEL_TRAINING="+data)
	if out, err := train.CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	code := filepath.Join(model, "code")
	os.MkdirAll(code, 0o755)
	src, _ := os.ReadFile(filepath.Join(root, "examples/digits/inference.py"))
	os.WriteFile(filepath.Join(code, "inference.py"), src, 0o644)
	tarball := filepath.Join(t.TempDir(), "model.tar.gz")
	if out, err := exec.Command("tar", "czf", tarball, "-C", model, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}

	ms := startModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=2"}, "--model-data", tarball)
	url := ms.url

	// Twenty real digits from the test split: the trained model classifies them.
	rows := readRows(t, filepath.Join(data, "test.csv"), 20)
	var inputs [][]float64
	var labels []int
	for _, r := range rows {
		labels = append(labels, int(r[0]))
		inputs = append(inputs, r[1:])
	}
	body, _ := json.Marshal(inputs)
	resp, err := http.Post(url+"/invocations", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pred struct{ Predictions []int }
	if resp.StatusCode != 200 || json.Unmarshal(out, &pred) != nil || len(pred.Predictions) != len(labels) {
		t.Fatalf("invocations: %d %s", resp.StatusCode, out)
	}
	right := 0
	for i := range labels {
		if pred.Predictions[i] == labels[i] {
			right++
		}
	}
	if right < 16 {
		t.Errorf("predicted %v for labels %v", pred.Predictions, labels)
	}

	// The user's input_fn raises for a type it does not read: a 500 with its message, server stays up.
	resp, err = http.Post(url+"/invocations", "text/plain", strings.NewReader("1,2,3"))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(out), "unsupported content type 'text/plain'") {
		t.Errorf("text/plain to the example's input_fn: %d %s", resp.StatusCode, out)
	}
	// Over the 6 MB default payload limit: 413.
	resp, err = http.Post(url+"/invocations", "application/json", bytes.NewReader(make([]byte, 6291457)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("oversize payload: %d, want 413", resp.StatusCode)
	}

	// SIGTERM: drains and exits cleanly, leaving no worker behind.
	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)
}

// modelServer is a running `sagebox model-server`, killed when the test ends.
type modelServer struct {
	url, addr string
	cmd       *exec.Cmd
	exited    chan error
	cacheEnv  string // the environment entry that marks its workers
	log       *lockedBuffer
}

// readyLine is the readiness handshake the model server writes to --ready-fd.
type readyLine struct {
	Ready bool   `json:"ready"`
	Addr  string `json:"addr"`
	Error string `json:"error"`
}

// startModelServer runs `sagebox model-server ARGS --port 0 --ready-fd 3`
// with env added and waits for the readiness handshake, which says the
// model is loaded and on which port. When env sets SAGEMAKER_BIND_TO_PORT
// or args say --listen, no --port is added.
func startModelServer(t *testing.T, env []string, args ...string) *modelServer {
	t.Helper()
	ms, line := launchModelServer(t, env, args...)
	if !line.Ready {
		t.Fatalf("model server not ready: %+v", line)
	}
	return ms
}

// launchModelServer starts the server as startModelServer does and
// returns its handshake line, whatever it says.
func launchModelServer(t *testing.T, env []string, args ...string) (*modelServer, readyLine) {
	t.Helper()
	args = append([]string{"model-server", "--ready-fd", "3"}, args...)
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "SAGEMAKER_BIND_TO_PORT=") }) &&
		!slices.Contains(args, "--listen") {
		args = append(args, "--port", "0")
	}
	ms := &modelServer{exited: make(chan error, 1), cacheEnv: "XDG_CACHE_HOME=" + t.TempDir(), log: &lockedBuffer{}}
	ms.cmd = exec.Command(binary, args...)
	ms.cmd.Env = append(append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3"), env...)
	ms.cmd.Env = append(ms.cmd.Env, ms.cacheEnv)
	ms.cmd.Stdout, ms.cmd.Stderr = ms.log, ms.log
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	ms.cmd.ExtraFiles = []*os.File{pw} // fd 3 in the child
	err = ms.cmd.Start()
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { ms.exited <- ms.cmd.Wait() }()
	t.Cleanup(func() {
		ms.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("model-server log:\n%s", ms.log.String())
		}
	})
	// The server closes its end after the line, and its workers never had
	// it: reading to end-of-file ends with the handshake.
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- b
	}()
	var b []byte
	select {
	case b = <-got:
	case <-time.After(90 * time.Second):
		pr.Close()
		t.Fatalf("no readiness handshake within 90 s")
	}
	var line readyLine
	if err := json.Unmarshal(b, &line); err != nil || !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("handshake %q: want one JSON line (%v)", b, err)
	}
	ms.addr = line.Addr
	if !strings.HasPrefix(line.Addr, "unix:") {
		ms.url = "http://" + line.Addr
	}
	return ms, line
}

// waitExit waits for the process to exit 0 and checks that none of its
// workers outlived it.
func (ms *modelServer) waitExit(t *testing.T) {
	t.Helper()
	select {
	case err := <-ms.exited:
		if err != nil {
			t.Errorf("model-server exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("model-server did not exit after SIGTERM")
	}
	// Other tests may run workers concurrently; only ours carry our cache dir.
	if pids := processesWithEnv(ms.cacheEnv); len(pids) != 0 {
		t.Errorf("processes of this model server (workers) outlived it: %v", pids)
	}
}

// processesWithEnv lists the processes whose environment holds the entry
// kv (readable ones: this user's).
func processesWithEnv(kv string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == kv {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func readRows(t *testing.T, path string, n int) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[:n] {
		var row []float64
		for _, f := range strings.Split(line, ",") {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// SageMaker tells the container its port in SAGEMAKER_BIND_TO_PORT; without
// --port the server listens there. A value that is not a port stops it at
// once with the variable's name.
func TestModelServerPortFromSageMakerEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	model := t.TempDir()
	os.MkdirAll(filepath.Join(model, "code"), 0o755)
	os.WriteFile(filepath.Join(model, "code", "inference.py"), []byte(`
def model_fn(model_dir):
    return None

def transform_fn(model, data, content_type, accept):
    return data, "text/plain"
`), 0o644)
	// The one test that must name its port in advance.
	_, port, _ := strings.Cut(freeAddr(t), ":")
	ms := startModelServer(t, []string{"SAGEMAKER_BIND_TO_PORT=" + port}, "--model-dir", model)
	if ms.addr != "127.0.0.1:"+port {
		t.Errorf("handshake address %q, want 127.0.0.1:%s", ms.addr, port)
	}
	resp, err := http.Post(ms.url+"/invocations", "text/plain", strings.NewReader("echo"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "echo" {
		t.Fatalf("invocations on $SAGEMAKER_BIND_TO_PORT: %d %q", resp.StatusCode, b)
	}
	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)

	for _, bad := range []string{"http", "0", "70000"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, binary, "model-server", "--model-dir", model)
		cmd.Env = append(os.Environ(), "SAGEMAKER_BIND_TO_PORT="+bad, "SAGEBOX_PYTHON=/usr/bin/python3")
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(string(out), "SAGEMAKER_BIND_TO_PORT") {
			t.Errorf("SAGEMAKER_BIND_TO_PORT=%s: %v\n%s", bad, err, out)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
