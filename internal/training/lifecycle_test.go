package training

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
	"github.com/sagebox/sagebox/internal/training/driver/drivertest"
	"github.com/sagebox/sagebox/internal/training/driver/fake"
)

// Fast tests of the lifecycle's own rules: a real Runner over the
// in-memory driver (driver/fake), whose hosts play drivertest.Scripts. No
// process, object store or Python; each test takes milliseconds.

// fakeJob is a job of n hosts whose entry point is train.py.
func fakeJob(name string, hosts int, opts ...func(*sagebox.TrainingJob)) *sagebox.TrainingJob {
	return newTestJob(name, map[string]string{"sagemaker_program": `"train.py"`}, append([]func(*sagebox.TrainingJob){withHosts(hosts)}, opts...)...)
}

const waitFake = 5 * time.Second

// long is a script's Run that a test ends (by a stop or State.Exit).
const long = time.Minute

// trace renders the driver calls made for job, without SyncCheckpoints
// (the periodic sync); consecutive Settles are sorted by host, as hosts
// that end in one poll settle in any order.
func trace(st *fake.State, job string) []string {
	var out []string
	for _, c := range st.Calls() {
		if c.Job != job || c.Method == fake.SyncCheckpoints {
			continue
		}
		s := string(c.Method)
		if c.Host >= 0 {
			s += fmt.Sprintf(" %d", c.Host)
		}
		if c.Method == fake.Release {
			s += fmt.Sprintf(" failed=%v", c.Failed)
		}
		if c.Err != nil {
			s += " err"
		}
		out = append(out, s)
	}
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.HasPrefix(out[j], "Settle ") {
			j++
		}
		slices.Sort(out[i:j])
		i = max(j, i+1)
	}
	return out
}

func checkTrace(t *testing.T, st *fake.State, job string, want ...string) {
	t.Helper()
	if got := trace(st, job); !slices.Equal(got, want) {
		t.Errorf("driver calls for %s:\n got %q\nwant %q", job, got, want)
	}
}

// settleText is the failure text the lifecycle gave Settle for host.
func settleText(t *testing.T, st *fake.State, job string, host int) string {
	t.Helper()
	for _, c := range st.Calls() {
		if c.Job == job && c.Method == fake.Settle && c.Host == host {
			return c.Text
		}
	}
	t.Fatalf("no Settle for %s host %d", job, host)
	return ""
}

// hostLines is what host (algo-N, N = index+1) logged, in order.
func (e *fakeEnv) hostLines(job string, host int) []string {
	return e.logs.lines(fmt.Sprintf("%s/algo-%d-", job, host+1))
}

// waitHostLine waits until host's log stream shows line.
func (e *fakeEnv) waitHostLine(job string, host int, line string) {
	e.t.Helper()
	deadline := time.Now().Add(waitFake)
	for !slices.Contains(e.hostLines(job, host), line) {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s host %d never logged %q; it logged %q", job, host, line, e.hostLines(job, host))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitEnd waits until job has ended and its runner is done with it
// (Release comes after the terminal status).
func (e *fakeEnv) waitEnd(name string, timeout time.Duration) *sagebox.TrainingJob {
	e.t.Helper()
	j := e.mem.waitEnd(e.t, name, timeout)
	deadline := time.Now().Add(timeout)
	for {
		e.runner.mu.Lock()
		active := e.runner.active[name] != nil
		e.runner.mu.Unlock()
		if !active {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s ended but its runner goroutine did not", name)
		}
		time.Sleep(time.Millisecond)
	}
}

func checkEnd(t *testing.T, j *sagebox.TrainingJob, status, secondary, reason, transitions string) {
	t.Helper()
	if j.TrainingJobStatus != status || j.SecondaryStatus != secondary || j.FailureReason != reason {
		t.Errorf("job %s ended %s/%s with reason %q; want %s/%s with %q",
			j.TrainingJobName, j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason, status, secondary, reason)
	}
	if got := transitionsString(j); got != transitions {
		t.Errorf("transitions %s; want %s", got, transitions)
	}
}

func TestFakeJobCompletes(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.state.SetScript("ok",
		drivertest.Script{Lines: []string{"hello from {host}", "step 1 loss=0.5;", "step 2 loss=0.25;"}, ModelFiles: map[string]string{"model.pth": "weights"}},
		drivertest.Script{Lines: []string{"hello from {host}", "working"}},
		drivertest.Script{Lines: []string{"hello from {host}", "acc=0.75;"}},
	)
	e.submit(fakeJob("ok", 3, func(j *sagebox.TrainingJob) {
		j.AlgorithmSpecification.MetricDefinitions = []sagebox.MetricDefinition{
			{Name: "train:loss", Regex: `loss=(\S+);`},
			{Name: "train:acc", Regex: `acc=(\S+);`},
		}
	}))
	j := e.waitEnd("ok", waitFake)
	checkEnd(t, j, sagebox.StatusCompleted, sagebox.SecondaryCompleted, "", "Starting → Downloading → Training → Uploading → Completed")
	checkTrace(t, e.state, "ok", "Prepare", "Install", "Start 0", "Start 1", "Start 2",
		"Settle 0", "Settle 1", "Settle 2", "Collect", "Release failed=false")
	for h := range 3 {
		if txt := settleText(t, e.state, "ok", h); txt != "" {
			t.Errorf("host %d settled with %q, want success", h, txt)
		}
		if _, ok := e.state.HostFile("ok", h, "output/success"); !ok {
			t.Errorf("host %d has no output/success", h)
		}
	}
	const uri = "s3://bkt/output/ok/output/model.tar.gz"
	if j.ModelArtifacts == nil || j.ModelArtifacts.S3ModelArtifacts != uri {
		t.Errorf("ModelArtifacts %+v, want %s", j.ModelArtifacts, uri)
	}
	if files, _ := e.state.Artifact(uri); files["model.pth"] != "weights" {
		t.Errorf("model artifact %v", files)
	}
	wantLines := [][]string{
		{"hello from algo-1", "step 1 loss=0.5;", "step 2 loss=0.25;"},
		{"hello from algo-2", "working"},
		{"hello from algo-3", "acc=0.75;"},
	}
	for h, want := range wantLines {
		if got := e.hostLines("ok", h); !slices.Equal(got, want) {
			t.Errorf("host %d logged %q, want %q", h, got, want)
		}
	}
	var got []string
	for _, m := range j.FinalMetricDataList {
		got = append(got, fmt.Sprintf("%s=%g", m.MetricName, m.Value))
	}
	if want := []string{"train:acc=0.75", "train:loss=0.25"}; !slices.Equal(got, want) {
		t.Errorf("FinalMetricDataList %v, want %v", got, want)
	}
}

func TestFakeFirstFailureFailsJob(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	// algo-2 fails at once; algo-1 and algo-3 die of the lifecycle's
	// SIGTERM (default action), which is a failure too, but a later one.
	e.state.SetScript("fail",
		drivertest.Script{Lines: []string{"ready"}, Run: long},
		drivertest.Script{Lines: []string{"ValueError: algo-2 gives up"}, ExitCode: 3},
		drivertest.Script{Lines: []string{"ready"}, Run: long},
	)
	e.submit(fakeJob("fail", 3))
	j := e.waitEnd("fail", waitFake)
	settled := toolkit.ExecuteUserScriptError(3, "", "ValueError: algo-2 gives up", []string{"/usr/bin/python3", "train.py"})
	if want := "ExecuteUserScriptError:\nExitCode 3\nErrorMessage \"ValueError: algo-2 gives up\"\nCommand \"/usr/bin/python3 train.py\""; settled != want {
		t.Fatalf("toolkit's text changed: %q", settled)
	}
	checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, "AlgorithmError: "+settled,
		"Starting → Downloading → Training → Uploading → Failed")
	if got := settleText(t, e.state, "fail", 1); got != settled {
		t.Errorf("host 1 settled with %q", got)
	}
	for _, h := range []int{0, 2} {
		got := settleText(t, e.state, "fail", h)
		if want := toolkit.ExecuteUserScriptError(143, "SIGTERM", "ready", []string{"/usr/bin/python3", "train.py"}); got != want {
			t.Errorf("host %d (stopped by the lifecycle) settled with %q, want %q", h, got, want)
		}
	}
	checkTrace(t, e.state, "fail", "Prepare", "Install", "Start 0", "Start 1", "Start 2",
		"Settle 0", "Settle 1", "Settle 2", "Collect", "Release failed=true")
	for _, c := range e.state.Calls() {
		if c.Method == fake.Settle {
			if c.Host != 1 {
				t.Errorf("host %d settled before host 1, which failed first", c.Host)
			}
			break
		}
	}
	if r := e.state.Running("fail"); len(r) != 0 {
		t.Errorf("hosts %v still run", r)
	}
}

func TestFakeOwnFailureFileIsTheReason(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.state.SetScript("own", drivertest.Script{Failure: "my own words", ExitCode: 1})
	e.submit(fakeJob("own", 1))
	j := e.waitEnd("own", waitFake)
	checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, "AlgorithmError: my own words",
		"Starting → Downloading → Training → Uploading → Failed")
	if got, _ := e.state.HostFile("own", 0, "output/failure"); got != "my own words" {
		t.Errorf("output/failure %q", got)
	}
}

func TestFakeStopRunsHandlers(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	sc := drivertest.Script{Lines: []string{"ready"}, Run: long, OnTerm: &drivertest.OnTerm{Print: "caught SIGTERM"}}
	e.state.SetScript("stop", sc, sc)
	e.submit(fakeJob("stop", 2))
	e.waitHostLine("stop", 0, "ready")
	e.waitHostLine("stop", 1, "ready")
	e.stop("stop")
	j := e.waitEnd("stop", waitFake)
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryStopped, "",
		"Starting → Downloading → Training → Stopping → Uploading → Stopped")
	for h := range 2 {
		if got := e.hostLines("stop", h); !slices.Equal(got, []string{"ready", "caught SIGTERM"}) {
			t.Errorf("host %d logged %q: SIGTERM not sent exactly once", h, got)
		}
		if txt := settleText(t, e.state, "stop", h); txt != "" {
			t.Errorf("host %d settled with %q", h, txt)
		}
	}
	checkTrace(t, e.state, "stop", "Prepare", "Install", "Start 0", "Start 1",
		"Settle 0", "Settle 1", "Collect", "Release failed=true")
}

func TestFakeStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 100 * time.Millisecond
	e := newFakeEnv(t, func(c *Config) { c.StopGrace = grace })
	e.state.SetScript("stubborn", drivertest.Script{Lines: []string{"ready"}, Run: long, OnTerm: &drivertest.OnTerm{Print: "ignoring SIGTERM", Ignore: true}})
	e.submit(fakeJob("stubborn", 1))
	e.waitHostLine("stubborn", 0, "ready")
	stopped := time.Now()
	e.stop("stubborn")
	j := e.waitEnd("stubborn", waitFake)
	if el := time.Since(stopped); el < grace {
		t.Errorf("ended %v after the stop, before the grace period %v", el, grace)
	}
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryStopped, "",
		"Starting → Downloading → Training → Stopping → Uploading → Stopped")
	if got := e.hostLines("stubborn", 0); !slices.Equal(got, []string{"ready", "ignoring SIGTERM"}) {
		t.Errorf("logged %q: SIGTERM not sent exactly once", got)
	}
	if got, want := settleText(t, e.state, "stubborn", 0), toolkit.ExecuteUserScriptError(137, "SIGKILL", "ready\nignoring SIGTERM", []string{"/usr/bin/python3", "train.py"}); got != want {
		t.Errorf("settled with %q, want %q", got, want)
	}
	checkTrace(t, e.state, "stubborn", "Prepare", "Install", "Start 0", "Settle 0", "Collect", "Release failed=true")
}

func TestFakeMaxRuntimeExceeded(t *testing.T) {
	t.Parallel()
	// The runner's clock runs 950ms behind, so the 1s MaxRuntime (the
	// API's smallest) is over 50ms after Training begins.
	e := newFakeEnv(t, func(c *Config) { c.Now = func() time.Time { return time.Now().Add(-950 * time.Millisecond) } })
	e.state.SetScript("slow", drivertest.Script{Lines: []string{"ready"}, Run: long,
		OnTerm: &drivertest.OnTerm{Print: "caught SIGTERM", After: 200 * time.Millisecond}})
	e.submit(fakeJob("slow", 1, func(j *sagebox.TrainingJob) { j.StoppingCondition.MaxRuntimeInSeconds = 1 }))
	mid := e.mem.wait(t, "slow", waitFake, func(j *sagebox.TrainingJob) bool { return j.TrainingJobStatus == sagebox.StatusStopping })
	if mid.SecondaryStatus != sagebox.SecondaryMaxRuntimeExceeded {
		t.Errorf("while stopping: %s/%s", mid.TrainingJobStatus, mid.SecondaryStatus)
	}
	if tr := mid.SecondaryStatusTransitions[len(mid.SecondaryStatusTransitions)-1]; tr.StatusMessage != "Training job exceeded MaxRuntimeInSeconds (1 s); stopping it" {
		t.Errorf("Stopping message %q", tr.StatusMessage)
	}
	j := e.waitEnd("slow", waitFake)
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryMaxRuntimeExceeded, "",
		"Starting → Downloading → Training → MaxRuntimeExceeded → Uploading → MaxRuntimeExceeded")
	if tr := j.SecondaryStatusTransitions[len(j.SecondaryStatusTransitions)-1]; tr.StatusMessage != "Training job stopped: it exceeded MaxRuntimeInSeconds (1s)" {
		t.Errorf("final message %q", tr.StatusMessage)
	}
	if got := e.hostLines("slow", 0); !slices.Equal(got, []string{"ready", "caught SIGTERM"}) {
		t.Errorf("logged %q", got)
	}
	checkTrace(t, e.state, "slow", "Prepare", "Install", "Start 0", "Settle 0", "Collect", "Release failed=true")
}

// stagingError is a driver's own error that carries its FailureReason.
type stagingError struct{ reason string }

func (e *stagingError) Error() string         { return "staging: " + e.reason }
func (e *stagingError) FailureReason() string { return e.reason }

func TestFakeFailuresBeforeLaunch(t *testing.T) {
	t.Parallel()
	t.Run("prepare", func(t *testing.T) {
		t.Parallel()
		e := newFakeEnv(t)
		e.state.SetHook(fake.Prepare, func(ctx context.Context, job *driver.Job, host int) error {
			return fmt.Errorf("stage channel: %w", toolkit.ClientErrorf("channel %q is empty", "train"))
		})
		e.submit(fakeJob("prep", 2))
		j := e.waitEnd("prep", waitFake)
		checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, `ClientError: channel "train" is empty`,
			"Starting → Downloading → Failed")
		checkTrace(t, e.state, "prep", "Prepare err", "Release failed=true")
		if j.ModelArtifacts != nil {
			t.Errorf("ModelArtifacts %+v", j.ModelArtifacts)
		}
	})
	t.Run("install", func(t *testing.T) {
		t.Parallel()
		e := newFakeEnv(t)
		e.state.SetHook(fake.Install, func(ctx context.Context, job *driver.Job, host int) error {
			return fmt.Errorf("pip: %w", &stagingError{reason: "ClientError: requirements.txt: no such package"})
		})
		e.submit(fakeJob("inst", 1))
		j := e.waitEnd("inst", waitFake)
		checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, "ClientError: requirements.txt: no such package",
			"Starting → Downloading → Training → Failed")
		checkTrace(t, e.state, "inst", "Prepare", "Install err", "Release failed=true")
	})
	t.Run("start", func(t *testing.T) {
		t.Parallel()
		e := newFakeEnv(t)
		e.state.SetScript("start", drivertest.Script{Lines: []string{"ready"}, Run: long})
		e.state.SetHook(fake.Start, func(ctx context.Context, job *driver.Job, host int) error {
			if host == 1 {
				return errors.New("no room for algo-2")
			}
			return nil
		})
		e.submit(fakeJob("start", 2))
		j := e.waitEnd("start", waitFake)
		checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, "InternalServerError: no room for algo-2",
			"Starting → Downloading → Training → Uploading → Failed")
		checkTrace(t, e.state, "start", "Prepare", "Install", "Start 0", "Start 1 err", "Settle 0", "Collect", "Release failed=true")
		if r := e.state.Running("start"); len(r) != 0 {
			t.Errorf("hosts %v still run", r)
		}
	})
}

func TestFakeStopWhilePreparing(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	entered := make(chan struct{})
	e.state.SetHook(fake.Prepare, func(ctx context.Context, job *driver.Job, host int) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	e.submit(fakeJob("prepstop", 1))
	select {
	case <-entered:
	case <-time.After(waitFake):
		t.Fatal("Prepare never called")
	}
	e.stop("prepstop")
	j := e.waitEnd("prepstop", waitFake)
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryStopped, "", "Starting → Downloading → Stopping → Stopped")
	checkTrace(t, e.state, "prepstop", "Prepare err", "Release failed=true")
}

func TestFakeRecoverReattaches(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	var lines []string
	for i := 1; i <= 20; i++ {
		lines = append(lines, fmt.Sprintf("{host} line %d", i))
	}
	sc := drivertest.Script{Lines: lines, Run: long}
	e.state.SetScript("adopt", sc, sc)
	e.submit(fakeJob("adopt", 2))
	e.waitHostLine("adopt", 0, "algo-1 line 20")
	e.waitHostLine("adopt", 1, "algo-2 line 20")
	e.closeRunner()
	if j := e.mem.get(t, "adopt"); j.TrainingJobStatus != sagebox.StatusInProgress || j.SecondaryStatus != sagebox.SecondaryTraining {
		t.Fatalf("closing the runner changed the job to %s/%s", j.TrainingJobStatus, j.SecondaryStatus)
	}
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The re-attached tasks end now, after the restart.
	deadline := time.Now().Add(waitFake)
	for e.state.Count(fake.Recover, "adopt") < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	e.state.Exit("adopt", 0, 0)
	e.state.Exit("adopt", 1, 0)
	j := e.waitEnd("adopt", waitFake)
	checkEnd(t, j, sagebox.StatusCompleted, sagebox.SecondaryCompleted, "", "Starting → Downloading → Training → Uploading → Completed")
	checkTrace(t, e.state, "adopt", "Prepare", "Install", "Start 0", "Start 1", "Recover 0", "Recover 1",
		"Settle 0", "Settle 1", "Collect", "Release failed=false")
	for _, c := range e.state.Calls() {
		if c.Job == "adopt" && c.Method == fake.Recover && c.Driver != 2 {
			t.Errorf("Recover by driver %d", c.Driver)
		}
	}
	for h := range 2 {
		var want []string
		for _, l := range lines {
			want = append(want, drivertest.ExpandLine(l, fmt.Sprintf("algo-%d", h+1)))
		}
		if got := e.hostLines("adopt", h); !slices.Equal(got, want) {
			t.Errorf("host %d logged %d lines:\n%q", h, len(got), got)
		}
	}
}

func TestFakeRecoverLostTask(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.state.SetScript("lost", drivertest.Script{Lines: []string{"ready"}, Run: long})
	e.submit(fakeJob("lost", 1))
	e.waitHostLine("lost", 0, "ready")
	e.closeRunner()
	if !e.state.Lose("lost", 0, errors.New("the node went away")) {
		t.Fatal("no task to lose")
	}
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.waitEnd("lost", waitFake)
	checkEnd(t, j, sagebox.StatusFailed, sagebox.SecondaryFailed, "InternalServerError: fake: task lost: the node went away",
		"Starting → Downloading → Training → Uploading → Failed")
	checkTrace(t, e.state, "lost", "Prepare", "Install", "Start 0", "Recover 0", "Collect", "Release failed=true")
}

func TestFakeRecoverWhileStoppingKeepsSIGTERM(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	e.state.SetScript("stop2", drivertest.Script{Lines: []string{"ready"}, Run: long,
		OnTerm: &drivertest.OnTerm{Print: "caught SIGTERM", After: 300 * time.Millisecond}})
	e.submit(fakeJob("stop2", 1))
	e.waitHostLine("stop2", 0, "ready")
	e.stop("stop2")
	e.waitHostLine("stop2", 0, "caught SIGTERM")
	e.closeRunner()
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.waitEnd("stop2", waitFake)
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryStopped, "",
		"Starting → Downloading → Training → Stopping → Uploading → Stopped")
	if got := e.hostLines("stop2", 0); !slices.Equal(got, []string{"ready", "caught SIGTERM"}) {
		t.Errorf("logged %q: the recovered job was signalled again", got)
	}
	checkTrace(t, e.state, "stop2", "Prepare", "Install", "Start 0", "Recover 0", "Settle 0", "Collect", "Release failed=true")
}

func TestFakeRecoverWhileDownloadingRestages(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	entered := make(chan struct{})
	var once sync.Once
	e.state.SetHook(fake.Prepare, func(ctx context.Context, job *driver.Job, host int) error {
		once.Do(func() { close(entered) })
		<-ctx.Done() // staging is slow; the server goes away meanwhile
		return ctx.Err()
	})
	e.state.SetScript("dl", drivertest.Script{Lines: []string{"ran after restart"}})
	e.submit(fakeJob("dl", 1))
	select {
	case <-entered:
	case <-time.After(waitFake):
		t.Fatal("Prepare never called")
	}
	e.closeRunner()
	if j := e.mem.get(t, "dl"); j.TrainingJobStatus != sagebox.StatusInProgress || j.SecondaryStatus != sagebox.SecondaryDownloading {
		t.Fatalf("closing the runner changed the job to %s/%s %q", j.TrainingJobStatus, j.SecondaryStatus, j.FailureReason)
	}
	e.state.SetHook(fake.Prepare, nil)
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.waitEnd("dl", waitFake)
	checkEnd(t, j, sagebox.StatusCompleted, sagebox.SecondaryCompleted, "", "Starting → Downloading → Training → Uploading → Completed")
	checkTrace(t, e.state, "dl", "Prepare err", "Prepare", "Install", "Start 0", "Settle 0", "Collect", "Release failed=false")
	if got := e.hostLines("dl", 0); !slices.Equal(got, []string{"ran after restart"}) {
		t.Errorf("logged %q", got)
	}
}

const waitingMsg = "Waiting for capacity: the job's 1 instance(s) need 1 slots, 0 MiB of memory, and other jobs or endpoints hold the machine's"

func waitWaiting(t *testing.T, e *fakeEnv, name string) {
	t.Helper()
	j := e.mem.wait(t, name, waitFake, func(j *sagebox.TrainingJob) bool {
		n := len(j.SecondaryStatusTransitions)
		return n > 0 && strings.HasPrefix(j.SecondaryStatusTransitions[n-1].StatusMessage, "Waiting for capacity")
	})
	if j.TrainingJobStatus != sagebox.StatusInProgress || j.SecondaryStatus != sagebox.SecondaryStarting || len(j.SecondaryStatusTransitions) != 1 {
		t.Errorf("waiting job is %s/%s, transitions %s", j.TrainingJobStatus, j.SecondaryStatus, transitionsString(j))
	}
	if got := j.SecondaryStatusTransitions[0].StatusMessage; got != waitingMsg {
		t.Errorf("message %q", got)
	}
}

func TestFakeCapacityQueues(t *testing.T) {
	t.Parallel()
	pool := capacity.NewPool(capacity.Resources{Slots: 2})
	e := newFakeEnv(t, func(c *Config) { c.Capacity, c.HostResources = pool, capacity.Resources{Slots: 1} })
	for _, name := range []string{"cap-a", "cap-b"} {
		e.state.SetScript(name, drivertest.Script{Lines: []string{"ready"}, Run: long})
		e.submit(fakeJob(name, 1))
		e.waitHostLine(name, 0, "ready")
	}
	e.submit(fakeJob("cap-c", 1))
	waitWaiting(t, e, "cap-c")
	if n := e.state.Count(fake.Prepare, "cap-c"); n != 0 {
		t.Fatalf("the waiting job was prepared %d times", n)
	}
	e.state.Exit("cap-a", 0, 0)
	if j := e.waitEnd("cap-a", waitFake); j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("cap-a %s", j.TrainingJobStatus)
	}
	j := e.waitEnd("cap-c", waitFake)
	checkEnd(t, j, sagebox.StatusCompleted, sagebox.SecondaryCompleted, "", "Starting → Downloading → Training → Uploading → Completed")
	checkTrace(t, e.state, "cap-c", "Prepare", "Install", "Start 0", "Settle 0", "Collect", "Release failed=false")
	if used := pool.Used(); used.Slots != 1 {
		t.Errorf("pool holds %v with only cap-b running", used)
	}
}

func TestFakeCapacityStopWhileWaiting(t *testing.T) {
	t.Parallel()
	pool := capacity.NewPool(capacity.Resources{Slots: 1})
	e := newFakeEnv(t, func(c *Config) { c.Capacity, c.HostResources = pool, capacity.Resources{Slots: 1} })
	e.state.SetScript("holder", drivertest.Script{Lines: []string{"ready"}, Run: long})
	e.submit(fakeJob("holder", 1))
	e.waitHostLine("holder", 0, "ready")
	e.submit(fakeJob("waiter", 1))
	waitWaiting(t, e, "waiter")
	e.stop("waiter")
	j := e.waitEnd("waiter", waitFake)
	checkEnd(t, j, sagebox.StatusStopped, sagebox.SecondaryStopped, "", "Starting → Stopping → Stopped")
	checkTrace(t, e.state, "waiter")
	if used := pool.Used(); used.Slots != 1 {
		t.Errorf("pool holds %v with only the holder running", used)
	}
	if r := e.state.Running("holder"); !slices.Equal(r, []int{0}) {
		t.Errorf("holder runs %v", r)
	}
}
