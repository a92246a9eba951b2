package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowInference answers each request after a second, with its own body.
const slowInference = `import time

def model_fn(model_dir):
    return "model"

def input_fn(body, content_type):
    return body

def predict_fn(data, model):
    time.sleep(1.0)
    return data

def output_fn(prediction, accept):
    return prediction, "text/plain"
`

// SIGTERM to the real binary while requests are in a worker and in the
// queue: every accepted request is answered, new connections are refused,
// and the process exits 0 without leaving a worker behind.
func TestModelServerDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	model := t.TempDir()
	os.MkdirAll(filepath.Join(model, "code"), 0o755)
	os.WriteFile(filepath.Join(model, "code", "inference.py"), []byte(slowInference), 0o644)

	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(binary, "model-server", "--model-dir", model, "--port", port)
	cacheEnv := "XDG_CACHE_HOME=" + t.TempDir()
	cmd.Env = append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3", "SAGEMAKER_MODEL_SERVER_WORKERS=1", cacheEnv)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("model-server log:\n%s", log.String())
		}
	}()
	url := "http://" + addr
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ping never answered 200")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// One worker, batch size 1: the first request runs, two wait in the queue.
	const n = 3
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, err := http.Post(url+"/invocations", "text/plain", strings.NewReader(fmt.Sprint("req-", i)))
			if err != nil {
				results[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = fmt.Sprintf("%d %s", resp.StatusCode, b)
		})
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted after SIGTERM")
	}
	wg.Wait()
	for i, r := range results {
		if want := fmt.Sprint("200 req-", i); r != want {
			t.Errorf("request %d: %q, want %q", i, r, want)
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("model-server exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("model-server did not exit after SIGTERM")
	}
	out, _ := exec.Command("pgrep", "-f", "sagebox_runtime worker --socket").Output()
	for _, pid := range strings.Fields(string(out)) {
		if env, err := os.ReadFile("/proc/" + pid + "/environ"); err == nil && bytes.Contains(env, []byte(cacheEnv)) {
			t.Errorf("worker %s outlived the model server", pid)
		}
	}
}
