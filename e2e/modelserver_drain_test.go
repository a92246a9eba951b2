package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pollUntil polls cond every 10 ms until it holds, failing after 30 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metricValue reads one unlabelled metric from the model server's
// /_sagebox/metrics, or -1 when it is not there.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/_sagebox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

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
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	// One request in the worker, the others queued.
	pollUntil(t, "two requests queued", func() bool { return metricValue(t, url, "sagebox_model_queue_depth") == 2 })
	ms.cmd.Process.Signal(syscall.SIGTERM)
	// The listener closes at once, while the requests still drain.
	for refused := false; !refused; {
		select {
		case <-allDone:
			t.Fatal("the listener still accepted connections when every request had been answered")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if refused = err != nil; !refused {
			c.Close()
			time.Sleep(5 * time.Millisecond)
		}
	}
	<-allDone
	for i, r := range results {
		if want := fmt.Sprint("200 req-", i); r != want {
			t.Errorf("request %d: %q, want %q", i, r, want)
		}
	}
	ms.waitExit(t)
}
