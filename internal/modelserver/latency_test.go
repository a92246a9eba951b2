package modelserver

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestLatencyReport compares the model server with FastAPI + uvicorn
// running the same handler with the same number of worker processes. It is
// a measurement, not a pass/fail test:
//
//	SAGEBOX_BENCH=1 go test -run LatencyReport -v ./internal/modelserver
func TestLatencyReport(t *testing.T) {
	if os.Getenv("SAGEBOX_BENCH") != "1" {
		t.Skip("set SAGEBOX_BENCH=1 to measure latency and throughput")
	}
	requireTorch(t)
	const echo = "def model_fn(model_dir):\n    return None\n\n" +
		"def transform_fn(model, data, content_type, accept):\n    return data, 'application/json'\n"
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "code"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "code", "inference.py"), []byte(echo), 0o644); err != nil {
		t.Fatal(err)
	}
	workers := 2
	ts := startPyServer(t, dir, true, func(c *Config) { c.Workers = workers })
	sageboxURLs := []string{ts.http.URL + "/invocations"}

	// uvicorn's own --workers mode stalls for tens of milliseconds per
	// request in this version, so FastAPI gets its best case instead: one
	// single-process uvicorn per worker, balanced by the client for free.
	var fastapiURLs []string
	var fastapiPIDs []int
	for range workers {
		url, pid := startFastAPI(t, dir)
		fastapiURLs = append(fastapiURLs, url)
		fastapiPIDs = append(fastapiPIDs, pid)
	}

	body := []byte(`{"inputs": [[0.1, 0.2, 0.3, 0.4]]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	for _, target := range []struct {
		name string
		urls []string
		pids []int
	}{{"sagebox", sageboxURLs, ts.pids()}, {"fastapi+uvicorn", fastapiURLs, fastapiPIDs}} {
		lat := sequential(t, client, target.urls, body, 2000)
		cpu0, self0 := cpuTime(target.pids), selfCPU()
		start := time.Now()
		n := throughput(t, client, target.urls, body, 32, 5*time.Second)
		secs := time.Since(start).Seconds()
		cpu, self := cpuTime(target.pids)-cpu0, selfCPU()-self0
		t.Logf("%-16s c=1: p50 %v p90 %v p99 %v | c=32: %.0f req/s, Python CPU %.0fµs/req, Go test process (client+server) CPU %.0fµs/req",
			target.name, pct(lat, 50), pct(lat, 90), pct(lat, 99), float64(n)/secs,
			cpu.Seconds()/float64(n)*1e6, self.Seconds()/float64(n)*1e6)
	}
	// A direct call of the same handler, for the added-latency figure.
	out, err := exec.Command(systemPython, "-c", `
import timeit
def transform_fn(model, data, content_type, accept):
    return data, 'application/json'
n = 200000
print(timeit.timeit(lambda: transform_fn(None, b'{}', 'application/json', 'application/json'), number=n) / n * 1e9)
`).Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("direct handler call: %s ns", bytes.TrimSpace(out))
}

func sequential(t *testing.T, c *http.Client, urls []string, body []byte, n int) []time.Duration {
	t.Helper()
	for i := range 200 { // warm up
		post(t, c, urls[i%len(urls)], body)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		post(t, c, urls[i%len(urls)], body)
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat
}

// cpuTime sums the user+system CPU time of processes (Linux /proc).
func cpuTime(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name: state is field 3; utime and
		// stime are fields 14 and 15, in clock ticks (100 Hz).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func throughput(t *testing.T, c *http.Client, urls []string, body []byte, conc int, d time.Duration) int64 {
	t.Helper()
	var n atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			url := urls[i%len(urls)]
			for time.Now().Before(stop) {
				post(t, c, url, body)
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load()
}

func post(t *testing.T, c *http.Client, url string, body []byte) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("%s: %d", url, resp.StatusCode)
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100].Round(time.Microsecond)
}

// startFastAPI serves the model's inference.py with FastAPI under one
// uvicorn process, the usual hand-rolled alternative to a model server.
func startFastAPI(t *testing.T, modelDir string) (string, int) {
	t.Helper()
	if err := exec.Command(systemPython, "-c", "import fastapi, uvicorn").Run(); err != nil {
		t.Skip("fastapi and uvicorn are not installed for " + systemPython)
	}
	app := `
import importlib.util, os
from fastapi import FastAPI, Request, Response
spec = importlib.util.spec_from_file_location("inference", os.path.join(os.environ["MODEL_DIR"], "code", "inference.py"))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
model = mod.model_fn(os.environ["MODEL_DIR"])
app = FastAPI()

@app.get("/ping")
async def ping():
    return {"status": "Healthy"}

@app.post("/invocations")
async def invocations(request: Request):
    body = await request.body()
    out, ct = mod.transform_fn(model, body, request.headers.get("content-type"), request.headers.get("accept"))
    return Response(content=out, media_type=ct)
`
	appDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(appDir, "app.py"), []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(systemPython, "-m", "uvicorn", "app:app", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--log-level", "warning", "--no-access-log")
	cmd.Dir = appDir
	cmd.Env = append(os.Environ(), "MODEL_DIR="+modelDir, "OMP_NUM_THREADS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, "uvicorn", func() bool {
		resp, err := http.Get(url + "/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return url + "/invocations", cmd.Process.Pid
}
