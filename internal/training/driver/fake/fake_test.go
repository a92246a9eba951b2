package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
	"github.com/sagebox/sagebox/internal/training/driver/drivertest"
	"github.com/sagebox/sagebox/internal/training/driver/fake"
)

// harness runs the conformance suite on one State: every New is a
// restarted server over it.
func harness(st *fake.State) drivertest.Harness {
	return drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return fake.New(st) },
		Job: func(t *testing.T, name string, scripts []drivertest.Script) *driver.Job {
			st.SetScript(name, scripts...)
			return newJob(name, len(scripts))
		},
		ReadModel: func(t *testing.T, uri string) map[string]string {
			files, ok := st.Artifact(uri)
			if !ok {
				t.Fatalf("no artifact at %s", uri)
			}
			return files
		},
		ReadHostFile: func(t *testing.T, job *driver.Job, host int, rel string) (string, bool) {
			return st.HostFile(job.Name, host, rel)
		},
		Timeout: 10 * time.Second,
	}
}

func newJob(name string, hosts int) *driver.Job {
	spec := &toolkit.Spec{Name: name, EntryPoint: "train.py", OutputPath: "s3://bkt/out"}
	job := &driver.Job{Name: name, Spec: spec}
	for i := range hosts {
		h := toolkit.Host{Index: i, Name: "algo-" + string(rune('1'+i))}
		spec.Hosts = append(spec.Hosts, h.Name)
		job.Hosts = append(job.Hosts, h)
	}
	return job
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, harness(fake.NewState()))
}

// TestFaults checks the knobs lifecycle tests use: hooks, Lose, Calls.
func TestFaults(t *testing.T) {
	st := fake.NewState()
	d := fake.New(st)
	ctx := context.Background()
	boom := errors.New("boom")

	st.SetHook(fake.Prepare, func(ctx context.Context, job *driver.Job, host int) error {
		if job.Name == "bad" {
			return boom
		}
		return nil
	})
	if err := d.Prepare(ctx, newJob("bad", 1)); !errors.Is(err, boom) {
		t.Fatalf("Prepare with a failing hook: %v", err)
	}
	// A hook that waits for a stop.
	st.SetHook(fake.Install, func(ctx context.Context, _ *driver.Job, _ int) error { <-ctx.Done(); return ctx.Err() })
	job := newJob("job", 2)
	if err := d.Prepare(ctx, job); err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithCancel(ctx)
	go cancel()
	if err := d.Install(stop, job); !errors.Is(err, context.Canceled) {
		t.Fatalf("Install cancelled: %v", err)
	}
	st.SetHook(fake.Install, nil)
	st.SetHook(fake.Start, func(_ context.Context, _ *driver.Job, host int) error {
		if host == 1 {
			return boom
		}
		return nil
	})
	st.SetScript("job", drivertest.Script{Lines: []string{"hi"}, Run: time.Hour})
	task, err := d.Start(ctx, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx, job, 1); !errors.Is(err, boom) {
		t.Fatalf("Start of host 1: %v", err)
	}
	if got := st.Running("job"); len(got) != 1 || got[0] != 0 {
		t.Fatalf("Running = %v; want [0]", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if out, _ := drivertest.Output(task); out == "hi\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no output from the task")
		}
	}
	if !st.Lose("job", 0, boom) {
		t.Fatal("Lose found no running task")
	}
	<-task.Done()
	if r := task.Result(); !r.Lost || !errors.Is(r.Err, boom) {
		t.Fatalf("lost task's Result %+v", r)
	}
	if st.Lose("job", 0, boom) {
		t.Fatal("Lose of an ended task reports it lost again")
	}
	if out, _ := drivertest.Output(task); out != "hi\n" {
		t.Fatalf("output %q after Lose", out)
	}
	st.SetHook(fake.Start, nil)
	again, err := d.Start(ctx, job, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exit("job", 1, 9) {
		t.Fatal("Exit found no running task")
	}
	<-again.Done()
	if r := again.Result(); r.ExitCode != 9 || r.Lost || r.Err != nil {
		t.Fatalf("Result %+v after Exit(9)", r)
	}
	d.Release(job, true)
	if n := st.Count(fake.Start, "job"); n != 3 {
		t.Errorf("Count(Start) = %d; want 3", n)
	}
	calls := st.Calls()
	last := calls[len(calls)-1]
	if last.Method != fake.Release || !last.Failed || last.Driver != 1 {
		t.Errorf("last call %+v; want Release(failed) by driver 1", last)
	}
	other := newJob("other", 2)
	if err := d.Prepare(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.New(st).Recover(ctx, other, 1); !errors.Is(err, driver.ErrNotStarted) {
		t.Errorf("Recover of a host never started: %v", err)
	}
}
