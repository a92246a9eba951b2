package training

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/gpu"
)

func fakeGPUs(n int) []gpu.Device {
	var devs []gpu.Device
	for i := range n {
		devs = append(devs, gpu.Device{Index: i, Name: "Fake GPU", UUID: fmt.Sprintf("GPU-fake-%d", i)})
	}
	return devs
}

// gpuScript prints what the host was given and waits for the file go.
func gpuScript(gate string) string {
	return fmt.Sprintf(`import os, time
print("gpus", os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), os.environ["SM_NUM_GPUS"], flush=True)
while not os.path.exists(%q):
    time.sleep(0.05)
`, gate)
}

// gpusOf waits for a host's "gpus CVD N" line and returns CVD and N.
func gpusOf(t *testing.T, e *env, stream string) (visible string, n string) {
	t.Helper()
	waitLog(t, e, stream, "gpus ", 60*time.Second)
	for _, l := range e.logs.lines(stream) {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "gpus" {
			return f[1], f[2]
		}
	}
	t.Fatalf("no gpus line in %s", e.logs.text(stream))
	return "", ""
}

// Concurrent jobs and their hosts get disjoint GPUs from the one
// allocator, released when each job ends, and a recovered job claims the
// GPUs its processes were started with.
func TestJobsGetTheirOwnGPUs(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	alloc := gpu.NewAllocator(fakeGPUs(4), slog.New(slog.DiscardHandler))
	e := newEnv(t, func(c *Config) { c.GPUs = alloc })
	gate := filepath.Join(t.TempDir(), "go")
	alloc.Reserve("an endpoint instance", 1) // holds GPU-fake-0

	hps := e.putSource("two-hosts", map[string]string{"train.py": gpuScript(gate)})
	e.submit(newTestJob("two-hosts", hps, withHosts(2)))
	v1, n1 := gpusOf(t, e, "two-hosts/algo-1-")
	v2, n2 := gpusOf(t, e, "two-hosts/algo-2-")
	// 3 free GPUs, 2 hosts: one each, the third stays free.
	if v1 != "GPU-fake-1" || n1 != "1" || v2 != "GPU-fake-2" || n2 != "1" {
		t.Fatalf("two hosts got %s (%s) and %s (%s); want GPU-fake-1 and GPU-fake-2, one each", v1, n1, v2, n2)
	}
	hps = e.putSource("alone", map[string]string{"train.py": gpuScript(gate)})
	e.submit(newTestJob("alone", hps))
	if v, n := gpusOf(t, e, "alone/algo-1-"); v != "GPU-fake-3" || n != "1" {
		t.Fatalf("a concurrent job got %s (%s); want the free GPU-fake-3", v, n)
	}

	// The server restarts: the new allocator knows nothing until the
	// recovered jobs claim what they had.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	alloc = gpu.NewAllocator(fakeGPUs(4), slog.New(slog.DiscardHandler))
	e.cfg.GPUs = alloc
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(alloc.Held("training-job/two-hosts")) != 2 || len(alloc.Held("training-job/alone")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("recovered jobs hold %v and %v", alloc.Held("training-job/two-hosts"), alloc.Held("training-job/alone"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h := alloc.Held("training-job/two-hosts"); !slices.Equal(h, []string{"GPU-fake-1", "GPU-fake-2"}) {
		t.Fatalf("the recovered two-host job claims %v", h)
	}
	if h := alloc.Held("training-job/alone"); !slices.Equal(h, []string{"GPU-fake-3"}) {
		t.Fatalf("the recovered job claims %v", h)
	}
	if free := alloc.Reserve("probe", 1); !slices.Equal(free, []string{"GPU-fake-0"}) {
		t.Fatalf("after recovery the free GPU is %v, want GPU-fake-0", free)
	}
	alloc.Release("probe")

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"two-hosts", "alone"} {
		if j := e.mem.waitEnd(t, name, 60*time.Second); j.TrainingJobStatus != sagebox.StatusCompleted {
			t.Fatalf("%s: %s %q", name, j.TrainingJobStatus, j.FailureReason)
		}
	}
	// The runner releases a job's GPUs as its goroutine ends, just after
	// the final status is written.
	deadline = time.Now().Add(10 * time.Second)
	for len(alloc.ReserveFree("after", 0, 1)) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("GPUs still held after the jobs ended: %v %v", alloc.Held("training-job/two-hosts"), alloc.Held("training-job/alone"))
		}
		alloc.Release("after")
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGPUShare(t *testing.T) {
	ids := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("GPU-%d", i))
		}
		return out
	}
	tests := []struct {
		gpus, host, n, count int
		visible              string
	}{
		{0, 0, 2, 0, ""},
		{8, 0, 1, 8, "GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-5,GPU-6,GPU-7"},
		{8, 1, 2, 4, "GPU-4,GPU-5,GPU-6,GPU-7"},
		{1, 1, 2, 1, "GPU-0"},
		{3, 1, 2, 1, "GPU-1"},
		{2, 2, 3, 1, "GPU-0"},
	}
	for _, tt := range tests {
		c, v := gpuShare(ids(tt.gpus), tt.host, tt.n)
		if c != tt.count || v != tt.visible {
			t.Errorf("gpuShare(%d GPUs, host %d of %d) = %d %q, want %d %q", tt.gpus, tt.host, tt.n, c, v, tt.count, tt.visible)
		}
	}
}
