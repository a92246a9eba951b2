package drivertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// Harness is what a driver's own test gives the suite.
type Harness struct {
	// New returns a driver over the backend's state: calling it again is
	// a restart of the server (the tasks of the earlier driver go on).
	New func(t *testing.T) driver.Driver
	// Job returns a job, not prepared yet, named name, with one host per
	// script, whose entry point on host i behaves as scripts[i] says. Its
	// Spec has an OutputPath and the default compression (model.tar.gz).
	// Its StateDir is what a restarted server would pass again.
	Job func(t *testing.T, name string, scripts []Script) *driver.Job
	// ReadModel returns the files (path to content) of the model artifact
	// at uri. Nil: the suite checks Collect's URI only.
	ReadModel func(t *testing.T, uri string) map[string]string
	// ReadHostFile returns the content of rel ("output/failure") under
	// host's /opt/ml tree, and whether it exists. Nil: the suite checks
	// what Settle returns only.
	ReadHostFile func(t *testing.T, job *driver.Job, host int, rel string) (string, bool)
	// Timeout bounds each wait of the suite; zero means 30 seconds.
	Timeout time.Duration
}

// Run runs the conformance suite against h's driver. Every subtest is a
// behaviour the lifecycle relies on, whatever the backend.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Job == nil {
		t.Fatal("drivertest: Harness.New and Harness.Job are required")
	}
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	s := &suite{h: h}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Output", s.testOutput},
		{"ExitCode", s.testExitCode},
		{"SIGKILL", s.testKill},
		{"SIGTERMHandler", s.testTermHandler},
		{"SIGTERMDefault", s.testTermDefault},
		{"SIGKILLAfterIgnoredSIGTERM", s.testKillAfterIgnoredTerm},
		{"RecoverRunning", s.testRecoverRunning},
		{"RecoverKeepsSIGTERM", s.testRecoverKeepsTerm},
		{"RecoverEnded", s.testRecoverEnded},
		{"RecoverNotStarted", s.testRecoverNotStarted},
		{"Settle", s.testSettle},
		{"SettleOwnFailure", s.testSettleOwnFailure},
		{"CollectAndRelease", s.testCollect},
		{"ConcurrentJobs", s.testConcurrentJobs},
	} {
		t.Run(c.name, c.fn)
	}
}

type suite struct{ h Harness }

var nonName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// jobName is a training job name unique to the (sub)test.
func jobName(t *testing.T, suffix string) string {
	n := strings.ToLower(nonName.ReplaceAllString(t.Name(), "-"))
	n = strings.Trim(n, "-")
	if suffix != "" {
		n += "-" + suffix
	}
	if len(n) > 63 {
		n = n[len(n)-63:]
		n = strings.TrimLeft(n, "-")
	}
	return n
}

// ctx is a context that ends with the test or after the suite's timeout.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 4*s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// prepare builds and prepares a job on d and checks that Prepare filled
// every host.
func (s *suite) prepare(t *testing.T, d driver.Driver, name string, scripts []Script) *driver.Job {
	t.Helper()
	job := s.h.Job(t, name, scripts)
	if job == nil || len(job.Hosts) != len(scripts) {
		t.Fatalf("Harness.Job(%s) gave %d hosts for %d scripts", name, len(job.Hosts), len(scripts))
	}
	ctx := s.ctx(t)
	if err := d.Prepare(ctx, job); err != nil {
		t.Fatalf("Prepare(%s): %v", name, err)
	}
	for i, host := range job.Hosts {
		if host.Index != i || host.Workspace.Root == "" {
			t.Fatalf("after Prepare, host %d is %+v: want Index %d and a Workspace", i, host, i)
		}
	}
	if err := d.Install(ctx, job); err != nil {
		t.Fatalf("Install(%s): %v", name, err)
	}
	t.Cleanup(func() { d.Release(job, true) })
	return job
}

// start starts host's task; the test's cleanup kills it if it still runs.
func (s *suite) start(t *testing.T, d driver.Driver, job *driver.Job, host int) driver.Task {
	t.Helper()
	task, err := d.Start(s.ctx(t), job, host)
	if err != nil {
		t.Fatalf("Start(%s, %d): %v", job.Name, host, err)
	}
	s.killAtCleanup(t, task)
	if task.ID() == "" || len(task.Argv()) == 0 {
		t.Errorf("task of %s host %d: ID %q, Argv %q; want both set", job.Name, host, task.ID(), task.Argv())
	}
	if task.Passive() {
		t.Errorf("task of %s host %d is Passive; only an MPI worker is", job.Name, host)
	}
	return task
}

func (s *suite) recover(t *testing.T, d driver.Driver, job *driver.Job, host int) driver.Task {
	t.Helper()
	task, err := d.Recover(s.ctx(t), job, host)
	if err != nil {
		t.Fatalf("Recover(%s, %d): %v", job.Name, host, err)
	}
	s.killAtCleanup(t, task)
	return task
}

func (s *suite) killAtCleanup(t *testing.T, task driver.Task) {
	t.Cleanup(func() {
		select {
		case <-task.Done():
			return
		default:
		}
		_ = task.Signal(syscall.SIGKILL)
		select {
		case <-task.Done():
		case <-time.After(s.h.Timeout):
			// An earlier driver instance's handle may not follow a task
			// its successor ended; the SIGKILL subtests hold Signal to it.
			t.Logf("task %s not Done %v after the cleanup's SIGKILL", task.ID(), s.h.Timeout)
		}
	})
}

// restarted is job as a restarted server hands it to Recover: the same
// name, spec and state directory, hosts not filled in yet.
func restarted(job *driver.Job) *driver.Job {
	r := *job
	r.Hosts = make([]toolkit.Host, len(job.Hosts))
	for i, h := range job.Hosts {
		r.Hosts[i] = toolkit.Host{Index: h.Index, Name: h.Name}
	}
	return &r
}

// Output reads all of task's output so far, holding its io.ReaderAt to
// its contract (a short read comes with an error, io.EOF at the end).
func Output(task driver.Task) (string, error) {
	r := task.Output()
	var b strings.Builder
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		n, err := r.ReadAt(buf, off)
		b.Write(buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		if n < len(buf) {
			return b.String(), fmt.Errorf("ReadAt(%d) read %d of %d bytes without an error; io.ReaderAt requires one", off-int64(n), n, len(buf))
		}
	}
}

func (s *suite) output(t *testing.T, task driver.Task) string {
	t.Helper()
	out, err := Output(task)
	if err != nil {
		t.Fatalf("reading the output of %s: %v", task.ID(), err)
	}
	return out
}

// waitOutput polls task's output until it satisfies cond.
func (s *suite) waitOutput(t *testing.T, task driver.Task, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		out := s.output(t, task)
		if cond(out) {
			return out
		}
		select {
		case <-task.Done():
			if out := s.output(t, task); cond(out) {
				return out
			}
			t.Fatalf("task %s ended (%+v) before its output had %s; output %q", task.ID(), task.Result(), what, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: no %s in its output after %v; output %q", task.ID(), what, s.h.Timeout, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *suite) waitLines(t *testing.T, task driver.Task, lines ...string) string {
	t.Helper()
	want := text(lines...)
	return s.waitOutput(t, task, fmt.Sprintf("%q", want), func(out string) bool { return strings.HasSuffix(out, want) })
}

func (s *suite) waitDone(t *testing.T, task driver.Task) driver.Result {
	t.Helper()
	return s.waitDoneWithin(t, task, s.h.Timeout)
}

func (s *suite) waitDoneWithin(t *testing.T, task driver.Task, d time.Duration) driver.Result {
	t.Helper()
	select {
	case <-task.Done():
	case <-time.After(d):
		t.Fatalf("task %s not Done after %v; output %q", task.ID(), d, s.output(t, task))
	}
	r := task.Result()
	if r.StartedAt.IsZero() || r.EndedAt.IsZero() || r.EndedAt.Before(r.StartedAt) {
		t.Errorf("task %s: StartedAt %v, EndedAt %v; want both set, in order", task.ID(), r.StartedAt, r.EndedAt)
	}
	return r
}

func notDone(t *testing.T, task driver.Task) {
	t.Helper()
	select {
	case <-task.Done():
		t.Fatalf("task %s is Done (%+v) while its script still runs", task.ID(), task.Result())
	default:
	}
}

// text is lines as printed.
func text(lines ...string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func wantResult(t *testing.T, task driver.Task, r driver.Result, code int, signal string) {
	t.Helper()
	if r.ExitCode != code || r.Signal != signal || r.Err != nil || r.Lost {
		t.Errorf("task %s ended %+v; want ExitCode %d, Signal %q, no Err, not Lost", task.ID(), r, code, signal)
	}
}

const long = 5 * time.Minute // a script that runs until the test ends it

func (s *suite) testOutput(t *testing.T) {
	d := s.h.New(t)
	scripts := []Script{
		{Lines: []string{"first on " + HostToken, "second on " + HostToken, "", "  indented, ünïcode"}},
		{Lines: []string{"only line of " + HostToken}},
	}
	job := s.prepare(t, d, jobName(t, ""), scripts)
	tasks := []driver.Task{s.start(t, d, job, 0), s.start(t, d, job, 1)}
	for i, task := range tasks {
		wantResult(t, task, s.waitDone(t, task), 0, "")
		var want []string
		for _, l := range scripts[i].Lines {
			want = append(want, ExpandLine(l, job.Hosts[i].Name))
		}
		if got := s.output(t, task); got != text(want...) {
			t.Errorf("output of host %d is %q; want %q", i, got, text(want...))
		}
		if !task.TermSentAt().IsZero() {
			t.Errorf("host %d: TermSentAt %v, but no SIGTERM was sent", i, task.TermSentAt())
		}
	}
	// Reading past the end gives io.EOF.
	buf := make([]byte, 8)
	if n, err := tasks[1].Output().ReadAt(buf, 1<<20); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("ReadAt past the end = %d, %v; want 0, io.EOF", n, err)
	}
}

func (s *suite) testExitCode(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Lines: []string{"failing"}, ExitCode: 3}})
	task := s.start(t, d, job, 0)
	wantResult(t, task, s.waitDone(t, task), 3, "")
	if got := s.output(t, task); got != text("failing") {
		t.Errorf("output %q; want %q", got, text("failing"))
	}
}

func (s *suite) testKill(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Lines: []string{"ready"}, Run: long}})
	task := s.start(t, d, job, 0)
	s.waitLines(t, task, "ready")
	notDone(t, task)
	if err := task.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal(SIGKILL): %v", err)
	}
	wantResult(t, task, s.waitDone(t, task), 137, "SIGKILL")
	if !task.TermSentAt().IsZero() {
		t.Errorf("TermSentAt %v after SIGKILL only; want zero", task.TermSentAt())
	}
}

func (s *suite) testTermHandler(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{
		Lines: []string{"ready"}, Run: long, OnTerm: &OnTerm{Print: "got SIGTERM", ExitCode: 7},
	}})
	task := s.start(t, d, job, 0)
	s.waitLines(t, task, "ready")
	before := time.Now()
	if err := task.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	after := time.Now()
	if ts := task.TermSentAt(); ts.Before(before.Add(-time.Second)) || ts.After(after.Add(time.Second)) {
		t.Errorf("TermSentAt %v; want between %v and %v", ts, before, after)
	}
	wantResult(t, task, s.waitDone(t, task), 7, "")
	if got := s.output(t, task); got != text("ready", "got SIGTERM") {
		t.Errorf("output %q; want %q", got, text("ready", "got SIGTERM"))
	}
}

func (s *suite) testTermDefault(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Lines: []string{"ready"}, Run: long}})
	task := s.start(t, d, job, 0)
	s.waitLines(t, task, "ready")
	if err := task.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	wantResult(t, task, s.waitDone(t, task), 128+int(syscall.SIGTERM), "SIGTERM")
	if task.TermSentAt().IsZero() {
		t.Error("TermSentAt is zero after SIGTERM")
	}
}

func (s *suite) testKillAfterIgnoredTerm(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{
		Lines: []string{"ready"}, Run: long, OnTerm: &OnTerm{Print: "ignoring SIGTERM", Ignore: true},
	}})
	task := s.start(t, d, job, 0)
	s.waitLines(t, task, "ready")
	if err := task.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	s.waitLines(t, task, "ready", "ignoring SIGTERM")
	notDone(t, task)
	sent := task.TermSentAt()
	if err := task.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal(SIGKILL): %v", err)
	}
	wantResult(t, task, s.waitDone(t, task), 137, "SIGKILL")
	if sent.IsZero() || !task.TermSentAt().Equal(sent) {
		t.Errorf("TermSentAt %v before SIGKILL, %v after; want it set once", sent, task.TermSentAt())
	}
}

func (s *suite) testRecoverRunning(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{
		Lines: []string{"one", "two"}, Run: long, OnTerm: &OnTerm{Print: "stopping", ExitCode: 5},
	}})
	first := s.start(t, d, job, 0)
	s.waitLines(t, first, "one", "two")

	d2 := s.h.New(t)
	again := restarted(job)
	task := s.recover(t, d2, again, 0)
	if again.Hosts[0] != job.Hosts[0] {
		t.Errorf("Recover filled host 0 as %+v; Prepare had %+v", again.Hosts[0], job.Hosts[0])
	}
	if got := s.output(t, task); got != text("one", "two") {
		t.Errorf("recovered output %q; want %q", got, text("one", "two"))
	}
	notDone(t, task)
	if !task.TermSentAt().IsZero() {
		t.Errorf("recovered TermSentAt %v; no SIGTERM was sent", task.TermSentAt())
	}
	if err := task.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM) to the recovered task: %v", err)
	}
	wantResult(t, task, s.waitDone(t, task), 5, "")
	if got := s.output(t, task); got != text("one", "two", "stopping") {
		t.Errorf("recovered output %q; want %q", got, text("one", "two", "stopping"))
	}
}

func (s *suite) testRecoverKeepsTerm(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{
		Lines: []string{"ready"}, Run: long, OnTerm: &OnTerm{Print: "SIGTERM handled", ExitCode: 0, After: 2 * time.Second},
	}})
	first := s.start(t, d, job, 0)
	s.waitLines(t, first, "ready")
	if err := first.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	s.waitLines(t, first, "ready", "SIGTERM handled")
	sent := first.TermSentAt()

	task := s.recover(t, s.h.New(t), restarted(job), 0)
	if ts := task.TermSentAt(); ts.IsZero() || ts.Sub(sent).Abs() > time.Second {
		t.Errorf("recovered TermSentAt %v; the first server sent SIGTERM at %v", ts, sent)
	}
	wantResult(t, task, s.waitDone(t, task), 0, "")
	if got := s.output(t, task); got != text("ready", "SIGTERM handled") {
		t.Errorf("output %q; want %q (the handler runs once)", got, text("ready", "SIGTERM handled"))
	}
}

func (s *suite) testRecoverEnded(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Lines: []string{"done"}, ExitCode: 3}})
	first := s.start(t, d, job, 0)
	s.waitDone(t, first)

	task := s.recover(t, s.h.New(t), restarted(job), 0)
	wantResult(t, task, s.waitDoneWithin(t, task, 2*time.Second), 3, "")
	if got := s.output(t, task); got != text("done") {
		t.Errorf("recovered output %q; want %q", got, text("done"))
	}
}

func (s *suite) testRecoverNotStarted(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Lines: []string{"ready"}, Run: long}, {Lines: []string{"never"}}})
	first := s.start(t, d, job, 0)
	s.waitLines(t, first, "ready")

	d2 := s.h.New(t)
	again := restarted(job)
	if task, err := d2.Recover(s.ctx(t), again, 1); !errors.Is(err, driver.ErrNotStarted) {
		if task != nil {
			s.killAtCleanup(t, task)
		}
		t.Errorf("Recover of a host never started: %v; want ErrNotStarted", err)
	}
	task := s.recover(t, d2, again, 0)
	notDone(t, task)

	never := s.h.Job(t, jobName(t, "unprepared"), []Script{{}})
	if task, err := d2.Recover(s.ctx(t), never, 0); !errors.Is(err, driver.ErrNotStarted) {
		if task != nil {
			s.killAtCleanup(t, task)
		}
		t.Errorf("Recover of a job never prepared: %v; want ErrNotStarted", err)
	}
}

func (s *suite) testSettle(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{}, {ExitCode: 3}})
	for i := range job.Hosts {
		s.waitDone(t, s.start(t, d, job, i))
	}
	if got, err := d.Settle(job, 0, ""); got != "" || err != nil {
		t.Errorf("Settle(host 0, success) = %q, %v; want \"\", nil", got, err)
	}
	if got, err := d.Settle(job, 1, "generated failure"); got != "generated failure" || err != nil {
		t.Errorf("Settle(host 1, failure) = %q, %v; want the failure, nil", got, err)
	}
	// What Settle wrote is the host's failure file now: it wins.
	if got, err := d.Settle(job, 1, "another failure"); got != "generated failure" || err != nil {
		t.Errorf("second Settle(host 1) = %q, %v; want the first failure, written by the first Settle", got, err)
	}
	if s.h.ReadHostFile == nil {
		return
	}
	if _, ok := s.h.ReadHostFile(t, job, 0, "output/success"); !ok {
		t.Error("host 0 has no output/success after Settle")
	}
	if _, ok := s.h.ReadHostFile(t, job, 0, "output/failure"); ok {
		t.Error("host 0 has an output/failure after a successful Settle")
	}
	if got, ok := s.h.ReadHostFile(t, job, 1, "output/failure"); !ok || got != "generated failure" {
		t.Errorf("host 1's output/failure = %q, %v; want the failure", got, ok)
	}
	if _, ok := s.h.ReadHostFile(t, job, 1, "output/success"); ok {
		t.Error("host 1 has an output/success after a failed Settle")
	}
}

func (s *suite) testSettleOwnFailure(t *testing.T) {
	d := s.h.New(t)
	job := s.prepare(t, d, jobName(t, ""), []Script{{Failure: "the script's own failure", ExitCode: 2}})
	s.waitDone(t, s.start(t, d, job, 0))
	if got, err := d.Settle(job, 0, "generated failure"); got != "the script's own failure" || err != nil {
		t.Errorf("Settle = %q, %v; want the script's own failure text, nil", got, err)
	}
	if s.h.ReadHostFile == nil {
		return
	}
	if got, ok := s.h.ReadHostFile(t, job, 0, "output/failure"); !ok || got != "the script's own failure" {
		t.Errorf("output/failure = %q, %v; want the script's own", got, ok)
	}
}

func (s *suite) testCollect(t *testing.T) {
	d := s.h.New(t)
	name := jobName(t, "")
	job := s.prepare(t, d, name, []Script{
		{ModelFiles: map[string]string{"model.pt": "weights of algo-1"}},
		{ModelFiles: map[string]string{"extra.txt": "from algo-2"}},
	})
	for i := range job.Hosts {
		task := s.start(t, d, job, i)
		wantResult(t, task, s.waitDone(t, task), 0, "")
		if _, err := d.Settle(job, i, ""); err != nil {
			t.Fatalf("Settle(%d): %v", i, err)
		}
	}
	if err := d.SyncCheckpoints(s.ctx(t), job); err != nil {
		t.Errorf("SyncCheckpoints: %v", err)
	}
	uri, err := d.Collect(s.ctx(t), job)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if !strings.HasSuffix(uri, "/"+name+"/output/model.tar.gz") {
		t.Errorf("model URI %q; want <output path>/%s/output/model.tar.gz", uri, name)
	}
	if s.h.ReadModel != nil {
		files := s.h.ReadModel(t, uri)
		for path, want := range map[string]string{"model.pt": "weights of algo-1", "extra.txt": "from algo-2"} {
			if got, ok := files[path]; !ok || got != want {
				t.Errorf("model artifact's %s = %q (present %v); want %q; files %v", path, got, ok, want, files)
			}
		}
	}
	d.Release(job, false)
	d.Release(job, false) // idempotent
	d.Release(job, true)
}

func (s *suite) testConcurrentJobs(t *testing.T) {
	d := s.h.New(t)
	const n = 3
	tasks := make([]driver.Task, n)
	for i := range tasks {
		job := s.prepare(t, d, jobName(t, fmt.Sprint(i)), []Script{{Lines: []string{fmt.Sprintf("job %d", i)}, Run: long}})
		tasks[i] = s.start(t, d, job, 0)
	}
	for i, task := range tasks {
		s.waitLines(t, task, fmt.Sprintf("job %d", i))
	}
	// Ending one job's task leaves the others running.
	if err := tasks[0].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.waitDone(t, tasks[0])
	for _, task := range tasks[1:] {
		notDone(t, task)
		if err := task.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for i, task := range tasks {
		wantResult(t, task, s.waitDone(t, task), 137, "SIGKILL")
		if got := s.output(t, task); got != text(fmt.Sprintf("job %d", i)) {
			t.Errorf("job %d output %q", i, got)
		}
	}
}
