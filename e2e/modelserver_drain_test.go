package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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

	ms := startModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=1"}, "--model-dir", model)
	url, addr := ms.url, ms.addr

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
	ms.cmd.Process.Signal(syscall.SIGTERM)
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
	ms.waitExit(t)
}
