package e2e

import (
	"bytes"
	"encoding/json"
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

// workersInference loads a real torch model in model_fn, counts model_fn's
// calls in its process, and answers each request with the worker's pid, that
// count, the request's own id and the model's output on the request's input.
const workersInference = `import json
import os
import time

import torch

MODEL_FN_CALLS = 0


def model_fn(model_dir):
    global MODEL_FN_CALLS
    MODEL_FN_CALLS += 1
    model = torch.nn.Linear(3, 1)
    model.load_state_dict(torch.load(os.path.join(model_dir, "model.pth")))
    model.eval()
    return model


def input_fn(body, content_type):
    return json.loads(body)


def predict_fn(data, model):
    time.sleep(0.02)  # hold the worker a little, so the load spreads
    with torch.no_grad():
        y = model(torch.tensor([data["x"]], dtype=torch.float32))
    return {"id": data["id"], "y": float(y.item())}


def output_fn(prediction, accept):
    prediction.update(pid=os.getpid(), ppid=os.getppid(), model_fn_calls=MODEL_FN_CALLS)
    return json.dumps(prediction), "application/json"
`

// saveLinear writes the state dict of nn.Linear(3, 1) with weight [1, 2, 3]
// and bias 0.5 to path: y(x) = x0 + 2*x1 + 3*x2 + 0.5, exact in float32 for
// the small integers the test sends.
const saveLinear = `import sys
import torch

m = torch.nn.Linear(3, 1)
with torch.no_grad():
    m.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))
    m.bias.fill_(0.5)
torch.save(m.state_dict(), sys.argv[1])
`

// workersTestWorkers is the pool size TestModelServerConcurrentRequestsOverWorkers
// runs; with 1 its "more than one worker served" check must fail.
const workersTestWorkers = 3

// Concurrent requests against the real binary with several real Python
// workers: every request is answered 200 with its own payload (no answer
// crosses to another request), each worker ran model_fn exactly once, the
// load spread over more than one worker, and every pid that answered is a
// worker process of the model server's (a child of its worker supervisor,
// which is the server's child).
func TestModelServerConcurrentRequestsOverWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	model := t.TempDir()
	writeFile(t, filepath.Join(model, "code", "inference.py"), workersInference)
	save := filepath.Join(t.TempDir(), "save.py")
	writeFile(t, save, saveLinear)
	if out, err := exec.Command("/usr/bin/python3", save, filepath.Join(model, "model.pth")).CombinedOutput(); err != nil {
		t.Fatalf("save the model: %v\n%s", err, out)
	}

	ms := startModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=" + strconv.Itoa(workersTestWorkers)}, "--model-dir", model)
	serverPid := ms.cmd.Process.Pid

	type answer struct {
		ID           string  `json:"id"`
		Y            float64 `json:"y"`
		Pid          int     `json:"pid"`
		Ppid         int     `json:"ppid"`
		ModelFnCalls int     `json:"model_fn_calls"`
	}
	const n = 50
	client := &http.Client{Timeout: 30 * time.Second}
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	var (
		wg      sync.WaitGroup
		answers = make([]answer, n)
		errs    = make([]string, n)
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			x := []int{i, i + 1, i + 2}
			body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("req-%d-%s", i, nonce), "x": x})
			<-start
			resp, err := client.Post(ms.url+"/invocations", "application/json", bytes.NewReader(body))
			if err != nil {
				errs[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs[i] = fmt.Sprintf("status %d: %s", resp.StatusCode, b)
				return
			}
			if err := json.Unmarshal(b, &answers[i]); err != nil {
				errs[i] = fmt.Sprintf("decode %q: %v", b, err)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d concurrent requests answered in %v", n, time.Since(began).Round(time.Millisecond))

	perPid := map[int]int{}
	for i, a := range answers {
		if errs[i] != "" {
			t.Errorf("request %d: %s", i, errs[i])
			continue
		}
		if want := fmt.Sprintf("req-%d-%s", i, nonce); a.ID != want {
			t.Errorf("request %d got the answer of %q", i, a.ID)
		}
		if want := float64(6*i) + 8.5; a.Y != want {
			t.Errorf("request %d: model output %v, want %v", i, a.Y, want)
		}
		if a.ModelFnCalls != 1 {
			t.Errorf("request %d: worker %d had called model_fn %d times, want 1", i, a.Pid, a.ModelFnCalls)
		}
		if !supervisedBy(a.Ppid, serverPid) {
			t.Errorf("request %d: answered by pid %d whose parent %d is not a worker supervisor of the model server (%d)", i, a.Pid, a.Ppid, serverPid)
		}
		perPid[a.Pid]++
	}
	t.Logf("requests per worker pid: %v", perPid)

	// The pids are worker processes: alive, under the server's worker
	// supervisors, running sagebox_runtime's worker, and no more of them
	// than the pool's size.
	workers := childWorkers(t, serverPid)
	slices.Sort(workers)
	if len(workers) != workersTestWorkers {
		t.Errorf("the model server has workers %v, want %d of them", workers, workersTestWorkers)
	}
	for pid := range perPid {
		if !slices.Contains(workers, pid) {
			t.Errorf("pid %d answered but is not one of the server's workers %v", pid, workers)
		}
		if pid == serverPid {
			t.Errorf("the model server itself (%d) answered", pid)
		}
	}
	if len(perPid) < 2 {
		t.Errorf("%d requests over %d workers were all served by %v: the load did not spread", n, workersTestWorkers, perPid)
	}

	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)
}

// supervisedBy reports whether pid is a worker supervisor (`sagebox
// exec-shim --attached`) started by server.
func supervisedBy(pid, server int) bool {
	if procParent(pid) != server {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 2 && args[1] == "exec-shim" && args[2] == "--attached"
}

// childWorkers lists the live processes under server's worker supervisors
// whose command line is `python -m sagebox_runtime worker ...`.
func childWorkers(t *testing.T, server int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !supervisedBy(procParent(pid), server) {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) >= 4 && args[1] == "-m" && args[2] == "sagebox_runtime" && args[3] == "worker" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procParent is pid's parent pid from /proc/PID/stat, or -1.
func procParent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}
