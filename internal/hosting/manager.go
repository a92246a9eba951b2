// Package hosting is the endpoint fleet manager: it brings an endpoint's
// stored deployment up as instances on this machine, publishes the route
// the data plane (internal/invoke) serves from, replaces instances that
// die, moves an endpoint to a new deployment without dropping requests,
// and brings every endpoint back after a restart.
//
// Each instance is one `sagebox model-server` process, run detached under
// internal/proc's supervisor, so instances outlive the server (as training
// hosts do) and are re-adopted from their state directories:
//
//	<data>/endpoints/<endpoint>/<generation>/<variant>/<instance-id>/  proc's state, instance.json, tail.json
//	<data>/endpoints/<endpoint>/models/<fleet>/<container>/           model directories, shared by a fleet's instances
//	<data>/runtime/<instance-id>/m.sock                               the instance's socket
//
// A fleet is a variant's instances of one model and instance type: an
// update that keeps a variant's model keeps its fleet (counts and weights
// change in place); one that changes it brings a new fleet up, publishes
// it, drains the old one and stops it. An instance is only published for
// the deployment whose generation it was assigned to (instance.json), so
// after a restart no request reaches a stale model.
//
// The endpoint's status changes only through sagebox.Endpoint's Promote,
// FailPending and FailCurrent; each endpoint has one goroutine (its
// worker) that does every change to its fleet in order.
package hosting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/invoke"
	"github.com/sagebox/sagebox/internal/staging"
)

// Store is the endpoint records hosting reads and writes
// (*metastore.DB implements it).
type Store interface {
	Endpoint(ctx context.Context, name string) (*sagebox.Endpoint, error)
	UpdateEndpoint(ctx context.Context, name string, fn func(*sagebox.Endpoint) error) (*sagebox.Endpoint, error)
	DeleteEndpoint(ctx context.Context, name string) error
	Endpoints(ctx context.Context) ([]*sagebox.Endpoint, error)
}

// LogSink receives instances' output (*logstore.Store implements it).
// Append creates the group and the stream on first use.
type LogSink interface {
	Append(ctx context.Context, group, stream string, events []sagebox.LogEvent) error
}

// RouteTable is the data plane's routes (*invoke.Table implements it);
// hosting is its one writer.
type RouteTable interface {
	Set(endpoint string, r *invoke.Route)
	Delete(endpoint string)
	// Outstanding is how many requests are in flight to an instance.
	Outstanding(instanceID string) int
}

// Capacity is the machine's budget that instances share with training
// hosts (*capacity.Pool implements it).
type Capacity interface {
	TryReserve(owner string, want capacity.Resources) error
	Claim(owner string, want capacity.Resources)
	ReleasePart(owner string, r capacity.Resources)
}

// GPUs hands out the machine's GPUs (*gpu.Allocator implements it).
type GPUs interface {
	Reserve(owner string, n int) []string
	Claim(owner string, ids []string) []string
	Release(owner string)
}

// RunAs makes instances run as an unprivileged user (the server runs as
// root): their model directories are chowned to it.
type RunAs struct {
	UID, GID uint32
}

// Config configures a Manager.
type Config struct {
	// DataDir is sagebox's data directory.
	DataDir string
	// Store holds the endpoints; NotFound is the error (errors.Is) its
	// Endpoint returns for a missing one (metastore.ErrNotFound).
	Store    Store
	NotFound error
	// Objects is the object store model data comes from.
	Objects staging.Objects
	// Logs gets each instance's output; nil discards it.
	Logs LogSink
	// Routes is where the serving fleet is published.
	Routes RouteTable
	// Capacity is the machine's budget; nil means no limit.
	// InstanceResources is what one instance takes (default 1 slot).
	Capacity          Capacity
	InstanceResources capacity.Resources
	// GPUs, if set, gives each instance of a GPU instance type (ml.g*,
	// ml.p*) a GPU of its own (shared when none is free) and hides the
	// GPUs from the others.
	GPUs GPUs
	// RunAs, if set, runs instances as that user.
	RunAs *RunAs
	// ModelServer is the argv of the model server command, such as
	// {os.Executable(), "model-server"}; Supervisor runs proc's
	// supervisor, such as {os.Executable(), "exec-shim"}.
	ModelServer []string
	Supervisor  []string
	// Python, if set, is the interpreter of the workers (SAGEBOX_PYTHON).
	Python string
	// SagemakerEndpoint is the server's URL; instances get it as
	// AWS_ENDPOINT_URL (and _S3, S3_ENDPOINT_URL) so boto3 in a handler
	// talks to sagebox. Region is AWS_REGION.
	SagemakerEndpoint, Region string
	// Credentials gives an endpoint's instances the key they sign with;
	// nil means the dummy key "sagebox".
	Credentials func(endpoint string) (accessKeyID, secret string)
	// Environ is the environment instances inherit (filtered by
	// toolkit.BaseEnv); nil means os.Environ().
	Environ []string
	// ModelDataLimits bound what one container's model data may unpack
	// to; LimitsFrom names where they are set, for the failure reason.
	ModelDataLimits archive.Limits
	LimitsFrom      string
	// StartupTimeout is how long an instance may take to answer /ping
	// (default 10 minutes).
	StartupTimeout time.Duration
	// DrainTimeout bounds the wait for an old instance's requests to
	// finish (default 1 minute); DrainGrace is the pause after the last
	// one (default 500 ms: a request that picked the instance just before
	// it left the route may not be counted yet); StopGrace the time from SIGTERM to SIGKILL
	// (default 30 s).
	DrainTimeout, DrainGrace, StopGrace time.Duration
	// RestartBackoff is the first pause before replacing an instance
	// again after a replacement failed (default 1 s); it doubles with
	// each failure in a row, up to a minute.
	RestartBackoff time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Manager runs every endpoint's fleet. It implements the control plane's
// Hosting interface.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	runtime string // socket directories

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	eps    map[string]*endpoint
	credit map[string]capacity.Resources // reserved by Reserve, not yet taken by an instance
	closed bool
}

// New returns a manager; call Recover before serving.
func New(cfg Config) (*Manager, error) {
	if cfg.DataDir == "" || cfg.Store == nil || cfg.Routes == nil || len(cfg.ModelServer) == 0 || len(cfg.Supervisor) == 0 {
		return nil, errors.New("hosting: DataDir, Store, Routes, ModelServer and Supervisor are required")
	}
	if cfg.InstanceResources == (capacity.Resources{}) {
		cfg.InstanceResources = capacity.Resources{Slots: 1}
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = 10 * time.Minute
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = time.Minute
	}
	if cfg.DrainGrace <= 0 {
		cfg.DrainGrace = 500 * time.Millisecond
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 30 * time.Second
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("hosting: %w", err)
	}
	cfg.DataDir = abs
	rt := filepath.Join(abs, "runtime")
	if len(rt)+len("/i-0123456789abcdef/m.sock") > 100 {
		// A socket path must fit sun_path.
		rt = filepath.Join(os.TempDir(), "sagebox-sockets-"+shortHash(abs))
	}
	for _, d := range []string{filepath.Join(abs, "endpoints"), rt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("hosting: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		cfg: cfg, log: l.With("system", "hosting"), runtime: rt, ctx: ctx, cancel: cancel,
		eps: map[string]*endpoint{}, credit: map[string]capacity.Resources{},
	}, nil
}

// Close stops managing: workers and log pumps end, instances keep
// running (a new Manager's Recover re-adopts them).
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

func (m *Manager) endpointsDir() string { return filepath.Join(m.cfg.DataDir, "endpoints") }

func (m *Manager) epDir(name string) string { return filepath.Join(m.endpointsDir(), name) }

// endpoint returns the endpoint's state, starting its worker on first use.
func (m *Manager) endpoint(name string) (*endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("hosting: the manager is closed")
	}
	ep := m.eps[name]
	if ep == nil {
		ep = newEndpoint(m, name)
		m.eps[name] = ep
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			ep.run(m.ctx)
		}()
	}
	return ep, nil
}

// forget drops a deleted endpoint's state.
func (m *Manager) forget(ep *endpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.eps[ep.name] == ep {
		delete(m.eps, ep.name)
	}
}

func (m *Manager) now() time.Time { return m.cfg.Now() }

func capOwner(ep string) string { return "endpoint/" + ep }

// Reserve checks and holds the capacity dep needs beyond what the
// endpoint runs now (a variant whose fleet is kept needs only its added
// instances). A refusal is a *sagebox.Error ResourceLimitExceeded.
func (m *Manager) Reserve(ctx context.Context, endpoint string, dep *sagebox.Deployment) (func(), error) {
	if m.cfg.Capacity == nil {
		return func() {}, nil
	}
	var cur *sagebox.Deployment
	if e, err := m.cfg.Store.Endpoint(ctx, endpoint); err == nil {
		cur = e.Internal.Current
	}
	n := 0
	for _, v := range dep.Variants {
		n += v.InstanceCount
		if c := cur.Variant(v.VariantName); c != nil && fleetKey(c) == fleetKey(&v) {
			n -= min(c.InstanceCount, v.InstanceCount)
		}
	}
	if n <= 0 {
		return func() {}, nil
	}
	want := m.times(n)
	if err := m.cfg.Capacity.TryReserve(capOwner(endpoint), want); err != nil {
		return nil, sagebox.Errorf(sagebox.ErrResourceLimit, "Endpoint %s needs %d more instance(s) than it runs now (%s), and %s. Lower the instance counts, delete endpoints or wait for training jobs to finish, or start the server with larger --capacity-slots/--capacity-memory.",
			endpoint, n, want, capacityReason(err))
	}
	m.mu.Lock()
	m.credit[endpoint] = addR(m.credit[endpoint], want)
	m.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { m.giveCredit(endpoint, want) }) }, nil
}

// capacityReason says why the pool refused: more than the machine has,
// or what holds the capacity now.
func capacityReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if errors.Is(err, capacity.ErrTooLarge) {
		return "that is more than the machine's capacity: " + msg
	}
	return "the machine's capacity is in use: " + msg
}

func (m *Manager) times(n int) capacity.Resources {
	r := m.cfg.InstanceResources
	return capacity.Resources{Slots: r.Slots * n, MemoryMiB: r.MemoryMiB * int64(n), GPUs: r.GPUs * n}
}

// giveCredit returns up to r of the endpoint's unused reservation.
func (m *Manager) giveCredit(ep string, r capacity.Resources) {
	if m.cfg.Capacity == nil {
		return
	}
	m.mu.Lock()
	c := m.credit[ep]
	r = capacity.Resources{Slots: min(r.Slots, c.Slots), MemoryMiB: min(r.MemoryMiB, c.MemoryMiB), GPUs: min(r.GPUs, c.GPUs)}
	c = subR(c, r)
	if c == (capacity.Resources{}) {
		delete(m.credit, ep)
	} else {
		m.credit[ep] = c
	}
	m.mu.Unlock()
	if r != (capacity.Resources{}) {
		m.cfg.Capacity.ReleasePart(capOwner(ep), r)
	}
}

// takeSlot holds one instance's capacity: out of the endpoint's
// reservation, or claimed (a recovered or replacement instance).
func (m *Manager) takeSlot(ep string) {
	if m.cfg.Capacity == nil {
		return
	}
	one := m.cfg.InstanceResources
	m.mu.Lock()
	c := m.credit[ep]
	if fitsR(one, c) {
		c = subR(c, one)
		if c == (capacity.Resources{}) {
			delete(m.credit, ep)
		} else {
			m.credit[ep] = c
		}
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.cfg.Capacity.Claim(capOwner(ep), one)
}

// freeSlot gives one stopped instance's capacity back.
func (m *Manager) freeSlot(ep string) {
	if m.cfg.Capacity != nil {
		m.cfg.Capacity.ReleasePart(capOwner(ep), m.cfg.InstanceResources)
	}
}

// Deploy has the endpoint's worker move it to its stored Pending
// deployment. It returns at once.
func (m *Manager) Deploy(ctx context.Context, endpoint string) error {
	ep, err := m.endpoint(endpoint)
	if err != nil {
		return err
	}
	ep.poke()
	return nil
}

// Delete stops the endpoint's instances (the record says Deleting),
// removes its files and then its record. It waits for that, or ctx.
func (m *Manager) Delete(ctx context.Context, endpoint string) error {
	ep, err := m.endpoint(endpoint)
	if err != nil {
		return err
	}
	done := ep.deleteRequested()
	ep.poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recover brings every stored endpoint back after a start: instances on
// disk that belong to the endpoint's current (or pending) deployment and
// still run are re-adopted and published, every other one is stopped,
// missing ones are started, and interrupted creates, updates and deletes
// continue. Endpoint directories without a record are removed.
func (m *Manager) Recover(ctx context.Context) error {
	eps, err := m.cfg.Store.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("hosting: recover: %w", err)
	}
	known := map[string]bool{}
	for _, e := range eps {
		known[e.EndpointName] = true
		ep, err := m.endpoint(e.EndpointName)
		if err != nil {
			return err
		}
		ep.adoptAll(ctx, e)
		ep.poke()
	}
	ents, _ := os.ReadDir(m.endpointsDir())
	for _, d := range ents {
		if !d.IsDir() || known[d.Name()] {
			continue
		}
		m.log.Info("stopping the instances of an endpoint that no longer exists", "endpoint", d.Name())
		newEndpoint(m, d.Name()).teardown(ctx)
	}
	return nil
}

func addR(a, b capacity.Resources) capacity.Resources {
	return capacity.Resources{Slots: a.Slots + b.Slots, MemoryMiB: a.MemoryMiB + b.MemoryMiB, GPUs: a.GPUs + b.GPUs}
}

func subR(a, b capacity.Resources) capacity.Resources {
	return capacity.Resources{Slots: a.Slots - b.Slots, MemoryMiB: a.MemoryMiB - b.MemoryMiB, GPUs: a.GPUs - b.GPUs}
}

func fitsR(a, b capacity.Resources) bool {
	return a.Slots <= b.Slots && a.MemoryMiB <= b.MemoryMiB && a.GPUs <= b.GPUs
}

// credit0 is all of the endpoint's unused reservation.
func (m *Manager) credit0(ep string) capacity.Resources {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.credit[ep]
}
