// Package fake is an in-memory driver.Driver for fast tests of the
// training lifecycle: a host's task is a goroutine that plays a
// drivertest.Script (its lines, files, SIGTERM handler and exit code), with
// no process, disk or object store.
//
// A State is the backend: the scripts, the hosts' files, the tasks and
// the uploaded artifacts. Every Driver made by New over one State sees the
// same tasks, so a second Driver is a restarted server that Recovers them.
// A test says what a job's hosts do with State.SetScript (keyed by job
// name; a job without one exits 0 at once on every host), injects faults
// with State.SetHook and State.Lose, ends tasks at chosen moments with
// State.Exit, and asserts on State.Calls,
// State.HostFile and State.Artifact.
package fake

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
	"github.com/sagebox/sagebox/internal/training/driver/drivertest"
)

// Method names a Driver method, in Calls and SetHook.
type Method string

// The methods.
const (
	Prepare         Method = "Prepare"
	Install         Method = "Install"
	Start           Method = "Start"
	Recover         Method = "Recover"
	Settle          Method = "Settle"
	SyncCheckpoints Method = "SyncCheckpoints"
	Collect         Method = "Collect"
	Release         Method = "Release"
)

// Hook runs first in a Driver method (not Release); an error it returns is
// the method's. host is -1 for the methods of a whole job; ctx is
// context.Background for Settle. A hook that blocks on ctx simulates slow
// staging that a stop interrupts.
type Hook func(ctx context.Context, job *driver.Job, host int) error

// Call is one call made to a Driver over the State.
type Call struct {
	Method Method
	Job    string
	Host   int    // -1 for the methods of a whole job
	Driver int    // which Driver (1 for the first New) made it
	Failed bool   // Release's failed
	Text   string // Settle's failure argument
	Err    error  // what the call returned
}

// State is the fake backend, shared by the Drivers made over it. Its
// methods are safe for concurrent use.
type State struct {
	mu        sync.Mutex
	drivers   int
	seq       int // tasks started, for their IDs
	scripts   map[string][]drivertest.Script
	hooks     map[Method]Hook
	jobs      map[string]*jobState
	artifacts map[string]map[string]string
	calls     []Call
}

type jobState struct {
	hosts    []toolkit.Host
	files    []map[string]string // per host: path under /opt/ml to content
	tasks    map[int]*task
	released bool
}

// NewState returns an empty backend.
func NewState() *State {
	return &State{
		scripts:   map[string][]drivertest.Script{},
		hooks:     map[Method]Hook{},
		jobs:      map[string]*jobState{},
		artifacts: map[string]map[string]string{},
	}
}

// SetScript says what job's hosts do from their next Start: scripts[i] on
// host i; a host without a script exits 0 at once.
func (s *State) SetScript(job string, scripts ...drivertest.Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[job] = slices.Clone(scripts)
}

// SetHook installs fn for method (nil removes it).
func (s *State) SetHook(method Method, fn Hook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn == nil {
		delete(s.hooks, method)
		return
	}
	s.hooks[method] = fn
}

// Lose ends host's running task as lost: its end was not observed
// (Result{Lost: true, Err: err}, exit code 137). It reports whether a
// task was running.
func (s *State) Lose(job string, host int, err error) bool {
	t := s.task(job, host)
	if t == nil {
		return false
	}
	return t.finish(driver.Result{ExitCode: 137, Lost: true, Err: fmt.Errorf("fake: task lost: %w", err)})
}

// Exit ends host's running task as if its script exited with code now,
// for tests that order the hosts' ends. It reports whether a task was
// running.
func (s *State) Exit(job string, host int, code int) bool {
	t := s.task(job, host)
	if t == nil {
		return false
	}
	return t.finish(driver.Result{ExitCode: code})
}

// Calls returns the calls made so far, in order.
func (s *State) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Count is how many calls of method were made for job.
func (s *State) Count(method Method, job string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method && c.Job == job {
			n++
		}
	}
	return n
}

// HostFile returns the content of rel under host's /opt/ml tree
// ("output/failure", "output/success", "model/<name>").
func (s *State) HostFile(job string, host int, rel string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[job]
	if j == nil || host < 0 || host >= len(j.files) {
		return "", false
	}
	v, ok := j.files[host][rel]
	return v, ok
}

// Artifact returns the files of what Collect uploaded at uri.
func (s *State) Artifact(uri string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.artifacts[uri]
	return a, ok
}

// Running is the hosts of job whose task has not ended.
func (s *State) Running(job string) []int {
	s.mu.Lock()
	j := s.jobs[job]
	var tasks map[int]*task
	if j != nil {
		tasks = maps(j.tasks)
	}
	s.mu.Unlock()
	var hosts []int
	for h, t := range tasks {
		select {
		case <-t.done:
		default:
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return hosts
}

func maps(m map[int]*task) map[int]*task {
	c := make(map[int]*task, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (s *State) task(job string, host int) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[job]; j != nil {
		return j.tasks[host]
	}
	return nil
}

// Driver is one server's view of the State.
type Driver struct {
	st *State
	id int
}

var _ driver.Driver = (*Driver)(nil)

// New returns a Driver over st: the first, or a restarted server's.
func New(st *State) *Driver {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.drivers++
	return &Driver{st: st, id: st.drivers}
}

// begin runs method's hook; end records the call.
func (d *Driver) begin(ctx context.Context, m Method, job *driver.Job, host int) error {
	d.st.mu.Lock()
	hook := d.st.hooks[m]
	d.st.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(ctx, job, host)
}

func (d *Driver) record(c Call) {
	c.Driver = d.id
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	d.st.calls = append(d.st.calls, c)
}

func workspace(job, host string) toolkit.Workspace {
	return toolkit.Workspace{Root: "/fake/" + job + "/" + host}
}

// Prepare fills job's hosts and gives each an empty tree.
func (d *Driver) Prepare(ctx context.Context, job *driver.Job) (err error) {
	defer func() { d.record(Call{Method: Prepare, Job: job.Name, Host: -1, Err: err}) }()
	if err := d.begin(ctx, Prepare, job, -1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range job.Hosts {
		job.Hosts[i].Workspace = workspace(job.Name, job.Hosts[i].Name)
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	j := &jobState{hosts: slices.Clone(job.Hosts), tasks: map[int]*task{}}
	if old := d.st.jobs[job.Name]; old != nil {
		j.tasks = old.tasks // an earlier run's tasks are the backend's until they end
	}
	for range job.Hosts {
		j.files = append(j.files, map[string]string{})
	}
	d.st.jobs[job.Name] = j
	return nil
}

// Install does nothing but its hook.
func (d *Driver) Install(ctx context.Context, job *driver.Job) (err error) {
	defer func() { d.record(Call{Method: Install, Job: job.Name, Host: -1, Err: err}) }()
	if err := d.begin(ctx, Install, job, -1); err != nil {
		return err
	}
	return ctx.Err()
}

// Start starts host's script.
func (d *Driver) Start(ctx context.Context, job *driver.Job, host int) (_ driver.Task, err error) {
	defer func() { d.record(Call{Method: Start, Job: job.Name, Host: host, Err: err}) }()
	if err := d.begin(ctx, Start, job, host); err != nil {
		return nil, err
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	j := d.st.jobs[job.Name]
	if j == nil || host < 0 || host >= len(j.hosts) {
		return nil, fmt.Errorf("fake: start %s host %d: not prepared", job.Name, host)
	}
	var script drivertest.Script
	if sc := d.st.scripts[job.Name]; host < len(sc) {
		script = sc[host]
	}
	argv := []string{"/usr/bin/python3", "train.py"}
	if job.Spec != nil && job.Spec.EntryPoint != "" {
		argv[1] = job.Spec.EntryPoint
	}
	t := newTask(d.st, job.Name, host, j.hosts[host].Name, script, argv)
	j.tasks[host] = t
	go t.run()
	return t, nil
}

// Recover returns host's task as the State has it.
func (d *Driver) Recover(ctx context.Context, job *driver.Job, host int) (_ driver.Task, err error) {
	defer func() { d.record(Call{Method: Recover, Job: job.Name, Host: host, Err: err}) }()
	if err := d.begin(ctx, Recover, job, host); err != nil {
		return nil, err
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	j := d.st.jobs[job.Name]
	if j == nil || j.tasks[host] == nil {
		return nil, fmt.Errorf("fake: recover %s host %d: %w", job.Name, host, driver.ErrNotStarted)
	}
	for i := range job.Hosts {
		if i < len(j.hosts) {
			job.Hosts[i] = j.hosts[i]
		}
	}
	return j.tasks[host], nil
}

// Settle writes output/success, or output/failure unless the script wrote
// one, whose text it returns.
func (d *Driver) Settle(job *driver.Job, host int, failure string) (text string, err error) {
	defer func() {
		d.record(Call{Method: Settle, Job: job.Name, Host: host, Text: failure, Err: err})
	}()
	if err := d.begin(context.Background(), Settle, job, host); err != nil {
		return failure, err
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	j := d.st.jobs[job.Name]
	if j == nil || host < 0 || host >= len(j.files) {
		return failure, fmt.Errorf("fake: settle %s host %d: not prepared", job.Name, host)
	}
	files := j.files[host]
	if failure == "" {
		files["output/success"] = ""
		return "", nil
	}
	if own, ok := files["output/failure"]; ok {
		return own, nil
	}
	files["output/failure"] = failure
	return failure, nil
}

// SyncCheckpoints does nothing but its hook.
func (d *Driver) SyncCheckpoints(ctx context.Context, job *driver.Job) (err error) {
	defer func() { d.record(Call{Method: SyncCheckpoints, Job: job.Name, Host: -1, Err: err}) }()
	return d.begin(ctx, SyncCheckpoints, job, -1)
}

// Collect stores every host's model files, merged, as the artifact at the
// model URI, and their output/data files at output.tar.gz's.
func (d *Driver) Collect(ctx context.Context, job *driver.Job) (uri string, err error) {
	defer func() { d.record(Call{Method: Collect, Job: job.Name, Host: -1, Err: err}) }()
	if err := d.begin(ctx, Collect, job, -1); err != nil {
		return "", err
	}
	if job.Spec == nil || job.Spec.OutputPath == "" {
		return "", nil
	}
	prefix := strings.TrimSuffix(job.Spec.OutputPath, "/") + "/" + job.Name + "/output/"
	uri = prefix + "model.tar.gz"
	if strings.EqualFold(job.Spec.Compression, "NONE") {
		uri = prefix + "model/"
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	model, data := map[string]string{}, map[string]string{}
	if j := d.st.jobs[job.Name]; j != nil {
		for _, files := range j.files {
			for p, body := range files {
				if rest, ok := strings.CutPrefix(p, "model/"); ok {
					model[rest] = body
				} else if rest, ok := strings.CutPrefix(p, "output/data/"); ok {
					data[rest] = body
				}
			}
		}
	}
	d.st.artifacts[uri] = model
	d.st.artifacts[prefix+"output.tar.gz"] = data
	return uri, nil
}

// Release marks job released; again is harmless.
func (d *Driver) Release(job *driver.Job, failed bool) {
	d.record(Call{Method: Release, Job: job.Name, Host: -1, Failed: failed})
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	if j := d.st.jobs[job.Name]; j != nil {
		j.released = true
	}
}

// output is an append-only log readable at any offset.
type output struct {
	mu sync.Mutex
	b  []byte
}

func (o *output) ReadAt(p []byte, off int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if off < 0 {
		return 0, fmt.Errorf("fake: negative offset %d", off)
	}
	if off >= int64(len(o.b)) {
		return 0, io.EOF
	}
	n := copy(p, o.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (o *output) println(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, line...)
	o.b = append(o.b, '\n')
}

// task is one host's script, playing in a goroutine.
type task struct {
	st         *State
	job, host  string
	index      int
	script     drivertest.Script
	argv       []string
	id         string
	out        output
	done       chan struct{}
	wake       chan struct{} // a signal is queued
	mu         sync.Mutex
	queue      []syscall.Signal
	termSentAt time.Time
	res        driver.Result
	ended      bool
	started    time.Time
}

// newTask is called with st.mu held.
func newTask(st *State, job string, index int, host string, script drivertest.Script, argv []string) *task {
	st.seq++
	n := st.seq
	return &task{
		st: st, job: job, host: host, index: index, script: script, argv: argv,
		id:   fmt.Sprintf("fake-%s-%s-%d", job, host, n),
		done: make(chan struct{}), wake: make(chan struct{}, 1), started: time.Now(),
	}
}

func (t *task) setFile(rel, body string) {
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	if j := t.st.jobs[t.job]; j != nil && t.index < len(j.files) {
		j.files[t.index][rel] = body
	}
}

// run plays the script in drivertest.Script's order.
func (t *task) run() {
	sc := t.script
	for name, body := range sc.ModelFiles {
		t.setFile("model/"+name, body)
	}
	if sc.Failure != "" {
		t.setFile("output/failure", sc.Failure)
	}
	for _, l := range sc.Lines {
		t.out.println(drivertest.ExpandLine(l, t.host))
	}
	code, endAt := sc.ExitCode, time.Now().Add(sc.Run)
	end := time.NewTimer(sc.Run)
	defer end.Stop()
	for {
		select {
		case <-t.done: // lost
			return
		case <-end.C:
			t.finish(driver.Result{ExitCode: code})
			return
		case <-t.wake:
		}
		for _, sig := range t.dequeue() {
			h := sc.OnTerm
			switch {
			case sig == syscall.SIGTERM && h != nil:
				if h.Print != "" {
					t.out.println(h.Print)
				}
				if h.Ignore {
					continue
				}
				if h.After <= 0 {
					t.finish(driver.Result{ExitCode: h.ExitCode})
					return
				}
				code, endAt = h.ExitCode, minTime(endAt, time.Now().Add(h.After))
				end.Reset(time.Until(endAt))
			case sig == 0:
			default:
				t.finish(driver.Result{ExitCode: 128 + int(sig), Signal: signalName(sig)})
				return
			}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (t *task) dequeue() []syscall.Signal {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queue
	t.queue = nil
	return q
}

// finish ends the task once; it reports whether this call did.
func (t *task) finish(r driver.Result) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	r.StartedAt, r.EndedAt = t.started, time.Now()
	t.res, t.ended = r, true
	close(t.done)
	return true
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

func (t *task) Output() io.ReaderAt   { return &t.out }
func (t *task) Done() <-chan struct{} { return t.done }
func (t *task) Passive() bool         { return false }
func (t *task) Argv() []string        { return slices.Clone(t.argv) }
func (t *task) ID() string            { return t.id }

func (t *task) Result() driver.Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.res
}

func (t *task) TermSentAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.termSentAt
}

// Signal queues sig for the script; a task that ended ignores it.
func (t *task) Signal(sig syscall.Signal) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil
	}
	if sig == syscall.SIGTERM && t.termSentAt.IsZero() {
		t.termSentAt = time.Now()
	}
	t.queue = append(t.queue, sig)
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}
