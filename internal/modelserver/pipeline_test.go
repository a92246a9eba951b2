package modelserver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// takeSlowTogether lets a worker take several waiting requests even after
// the slow one that occupied it (share), as it does for quick ones.
func takeSlowTogether(c *Config) { c.pipelineQuick = time.Hour }

// queueBehindBusyWorker occupies the only worker with a slow request (the
// fake worker's "sleep:300ms"), then queues bodies in order and returns
// their responses once all are answered.
func queueBehindBusyWorker(t *testing.T, ts *testServer, bodies []string) []response {
	t.Helper()
	return queueBehind(t, ts, "sleep:300ms", bodies)
}

// queueBehind is queueBehindBusyWorker with busy as the slow request.
func queueBehind(t *testing.T, ts *testServer, busy string, bodies []string) []response {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if r := ts.invoke(t, busy); r.code != 200 {
			t.Errorf("the request occupying the worker: %d %s", r.code, r.body)
		}
	})
	eventually(t, "worker busy", func() bool { return ts.pending.Load() == 1 && ts.queue.Len() == 0 })
	out := make([]response, len(bodies))
	for i, b := range bodies {
		wg.Go(func() { out[i] = ts.invoke(t, b) })
		eventually(t, "queued in order", func() bool { return ts.queue.Len() == i+1 })
	}
	wg.Wait()
	return out
}

// With batching off, the requests a worker takes together still reach the
// handlers one per batch, each with its own answer.
func TestPipelineKeepsBatchesOfOne(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: takeSlowTogether})
	rs := queueBehindBusyWorker(t, ts, []string{"a", "status:415", "c", "d"})
	for i, want := range []int{200, 415, 200, 200} {
		if rs[i].code != want || rs[i].header.Get("X-Batch-Size") != "" && rs[i].header.Get("X-Batch-Size") != "1" {
			t.Fatalf("request %d: %d (batch %q), want %d", i, rs[i].code, rs[i].header.Get("X-Batch-Size"), want)
		}
	}
	if rs[0].body != "a" || rs[2].body != "c" || rs[3].body != "d" {
		t.Fatalf("bodies %q %q %q", rs[0].body, rs[2].body, rs[3].body)
	}
	b, _ := os.ReadFile(filepath.Join(ts.state, "batches.log"))
	if got := strings.Fields(string(b)); len(got) != 5 || strings.Trim(strings.Join(got, ""), "1") != "" {
		t.Fatalf("batches.log = %q, want five batches of one", b)
	}
}

// A worker that dies on one of the requests it took together fails that
// one only: the ones after it were never started and are answered by the
// restarted worker.
func TestPipelineCrashFailsOnlyItsRequest(t *testing.T) {
	for _, tt := range []struct {
		body, want string
		code       int
	}{
		{"crash", "exited with code 3", 502},
		{"hang", "timed out", 504},
	} {
		t.Run(tt.body, func(t *testing.T) {
			ts := startTestServer(t, testOptions{mutate: func(c *Config) {
				takeSlowTogether(c)
				c.RequestTimeout = 2 * time.Second
			}})
			rs := queueBehindBusyWorker(t, ts, []string{"a", tt.body, "c", "d"})
			if rs[0].code != 200 || rs[0].body != "a" {
				t.Errorf("request before the failure: %d %s", rs[0].code, rs[0].body)
			}
			if rs[1].code != tt.code || !strings.Contains(rs[1].body, tt.want) {
				t.Errorf("the failing request: %d %s, want %d with %q", rs[1].code, rs[1].body, tt.code, tt.want)
			}
			for i, want := range []string{"c", "d"} {
				if r := rs[2+i]; r.code != 200 || r.body != want {
					t.Errorf("request after the failure: %d %s, want 200 %s", r.code, r.body, want)
				}
			}
		})
	}
}

// An answer the worker holds back behind a slower request is not taken
// for a timeout: each request has the full timeout from when the worker
// started it, which its progress page says.
func TestPipelineHeldAnswerWaitsForTheRunningRequest(t *testing.T) {
	ts := startTestServer(t, testOptions{mutate: func(c *Config) {
		takeSlowTogether(c)
		c.RequestTimeout = time.Second
	}})
	// The fake worker holds the first answer until the second request is
	// done, 1.2 s after the first started: past the first's own deadline,
	// within the second's.
	rs := queueBehindBusyWorker(t, ts, []string{"sleep:600ms", "sleep:600ms"})
	for i, r := range rs {
		if r.code != 200 {
			t.Errorf("request %d: %d %s", i, r.code, r.body)
		}
	}
	if h := ts.Health(); h.Workers[0].Restarts != 0 || len(ts.loads(t)) != 1 {
		t.Errorf("the worker was restarted (%d restarts, %d loads)", h.Workers[0].Restarts, len(ts.loads(t)))
	}
}

// The progress page lives in the socket directory for the worker's life,
// and is removed with it.
func TestProgressPageFollowsTheWorkersLife(t *testing.T) {
	ts := startTestServer(t, testOptions{})
	loads := ts.loads(t)
	if len(loads) != 1 || loads[0].Load.Progress == "" {
		t.Fatalf("LOAD records %+v, want one naming a progress page", loads)
	}
	page := loads[0].Load.Progress
	if fi, err := os.Stat(page); err != nil || fi.Size() != progressSize || filepath.Dir(page) != ts.sockDir {
		t.Fatalf("progress page %s: %v, %v (socket dir %s)", page, fi, err, ts.sockDir)
	}
	if r := ts.invoke(t, "x"); r.code != 200 {
		t.Fatalf("invoke: %d %s", r.code, r.body)
	}
	ts.invoke(t, "crash") // the next life gets a page of its own
	eventually(t, "worker restarted", func() bool { return len(ts.loads(t)) == 2 })
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Fatalf("the dead worker's page is still there: %v", err)
	}
	if p2 := ts.loads(t); p2[0].Load.Progress == p2[1].Load.Progress {
		t.Fatalf("both lives got the page %s", page)
	}
}

// With batching off, a worker that took several quick requests at once
// keeps only its even share while other workers wait for requests, and
// puts the rest back at the front of the queue, in order.
func TestPipelineSharesWithIdleWorkers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		idle       int
		handlerAvg time.Duration
		keep       int
	}{
		{"one idle worker", 1, 0, 4},
		{"three idle workers", 3, 0, 2},
		{"more idle workers than requests", 20, 0, 1},
		{"no idle worker", 0, 0, 8},
		{"slow handlers", 1, pipelineQuick, 1},
		{"slow handlers, no idle worker", 0, pipelineQuick, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ModelDir = t.TempDir()
			s, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := &worker{srv: s, handlerAvg: tc.handlerAvg}
			var calls []*call
			for i := range 8 {
				c := newCall()
				c.req.ID = uint64(i)
				calls = append(calls, c)
			}
			s.idle.Store(int32(tc.idle))
			kept := w.share(slices.Clone(calls))
			if len(kept) != tc.keep || !slices.Equal(kept, calls[:tc.keep]) {
				t.Fatalf("kept %d calls, want the first %d", len(kept), tc.keep)
			}
			if n := s.queue.Len(); n != 8-tc.keep {
				t.Fatalf("%d calls back in the queue, want %d", n, 8-tc.keep)
			}
			if tc.keep == len(calls) {
				return
			}
			back, err := s.queue.Next(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back, calls[tc.keep:]) {
				t.Fatalf("the queue gives back %d calls, not the rest in order", len(back))
			}
		})
	}
}

// With batching off, a worker does not keep slow requests to itself:
// eight slow requests arriving together on two workers are shared between
// them.
func TestPipelineDoesNotHoldSlowRequests(t *testing.T) {
	ts := startTestServer(t, testOptions{workers: 2})
	var wg sync.WaitGroup
	var mu sync.Mutex
	perWorker := map[string]int{}
	for range 8 {
		wg.Go(func() {
			r := ts.invoke(t, "sleep:200ms")
			if r.code != 200 {
				t.Errorf("invoke: %d %s", r.code, r.body)
			}
			mu.Lock()
			perWorker[r.header.Get("X-Worker-Id")]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(perWorker) != 2 || perWorker["0"] < 3 || perWorker["1"] < 3 {
		t.Fatalf("requests per worker %v, want them shared", perWorker)
	}
}
