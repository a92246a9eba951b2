package hosting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// Files in an instance's state directory (besides internal/proc's).
const (
	fileInstance = "instance.json"
	fileTail     = "tail.json"
)

// instanceRecord is instance.json, written before the process starts and
// again when the instance is assigned to a newer generation.
type instanceRecord struct {
	ID         string    `json:"id"`
	Variant    string    `json:"variant"`
	Fleet      string    `json:"fleet"`
	Generation int       `json:"generation"`
	Socket     string    `json:"socket"`
	GPUs       []string  `json:"gpus,omitempty"`
	StartedAt  time.Time `json:"started_at"`
}

// instance is one model server of a variant's fleet.
type instance struct {
	ep      *endpoint
	id      string
	variant string
	key     string // fleetKey
	dir     string // state directory
	sock    string
	started time.Time
	h       *proc.Handle

	// Under ep.mu.
	generation int
	ready      bool
	stopping   bool

	readyCh chan struct{} // closed once /ping answered 200
	failCh  chan struct{} // closed when it cannot become ready; err says why
	err     error
	gone    chan struct{} // closed once it ended and its files are cleaned up
	logDone chan struct{}
}

func (in *instance) gen() int {
	in.ep.mu.Lock()
	defer in.ep.mu.Unlock()
	return in.generation
}

func (in *instance) isReady() bool {
	in.ep.mu.Lock()
	defer in.ep.mu.Unlock()
	return in.ready
}

func (in *instance) record() instanceRecord {
	return instanceRecord{ID: in.id, Variant: in.variant, Fleet: in.key, Generation: in.generation, Socket: in.sock, StartedAt: in.started}
}

// setGen assigns the instance to generation gen, on disk first.
func (in *instance) setGen(gen int) error {
	in.ep.mu.Lock()
	defer in.ep.mu.Unlock()
	if in.generation == gen {
		return nil
	}
	rec := in.record()
	rec.Generation = gen
	var old instanceRecord
	if statefile.ReadJSON(filepath.Join(in.dir, fileInstance), &old) == nil {
		rec.GPUs = old.GPUs
	}
	if err := statefile.WriteJSON(filepath.Join(in.dir, fileInstance), rec); err != nil {
		return err
	}
	in.generation = gen
	return nil
}

func newInstanceID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "i-" + hex.EncodeToString(b)
}

func gpuOwner(ep, id string) string { return "endpoint/" + ep + "/" + id }

// wantsGPU says whether an instance type has GPUs (ml.g4dn.xlarge, ml.p3.2xlarge).
func wantsGPU(instanceType string) bool {
	return strings.HasPrefix(instanceType, "ml.g") || strings.HasPrefix(instanceType, "ml.p")
}

// start starts one instance of v's fleet fl for generation gen.
func (ep *endpoint) start(ctx context.Context, v *sagebox.DeployedVariant, fl *fleet, gen int) (*instance, error) {
	m := ep.m
	id := newInstanceID()
	dir := filepath.Join(m.epDir(ep.name), strconv.Itoa(gen), v.VariantName, id)
	sockDir := filepath.Join(m.runtime, id)
	in := &instance{
		ep: ep, id: id, variant: v.VariantName, key: fl.key, dir: dir, sock: filepath.Join(sockDir, "m.sock"),
		started: m.now(), generation: gen,
		readyCh: make(chan struct{}), failCh: make(chan struct{}), gone: make(chan struct{}), logDone: make(chan struct{}),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, err
	}
	cred := m.credential()
	if cred != nil {
		if err := os.Chown(sockDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("hand the socket directory over: %w", err)
		}
	}
	rec := in.record()
	env := m.instanceEnv(ep.name)
	if cred != nil {
		env = append(env, "HOME="+sockDir)
	}
	if m.cfg.GPUs != nil {
		if wantsGPU(v.InstanceType) {
			rec.GPUs = m.cfg.GPUs.Reserve(gpuOwner(ep.name, id), 1)
		}
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(rec.GPUs, ","))
	}
	if err := statefile.WriteJSON(filepath.Join(dir, fileInstance), rec); err != nil {
		m.releaseGPUs(ep.name, id)
		return nil, err
	}
	argv := append(append([]string{}, m.cfg.ModelServer...), fl.Args...)
	argv = append(argv, "--listen", "unix:"+in.sock)
	m.takeSlot(ep.name)
	h, err := proc.Start(ctx, proc.Spec{
		Path: argv[0], Args: argv[1:], Dir: sockDir, Env: env,
		Detach: true, StateDir: dir, Supervisor: m.cfg.Supervisor, Credential: cred,
	})
	if err != nil {
		m.freeSlot(ep.name)
		m.releaseGPUs(ep.name, id)
		os.RemoveAll(dir)
		os.RemoveAll(sockDir)
		return nil, err
	}
	in.h = h
	ep.log.Info("instance started", "instance", id, "variant", v.VariantName, "generation", gen, "pid", h.SupervisorPid(), "argv", toolkit.ShellJoin(argv))
	ep.mu.Lock()
	ep.insts[id] = in
	ep.mu.Unlock()
	m.follow(in)
	return in, nil
}

// adopt re-attaches to the instance whose state directory is dir; nil
// (and its files removed) when it has ended.
func (m *Manager) adopt(ctx context.Context, ep *endpoint, dir string) (*instance, error) {
	var rec instanceRecord
	if err := statefile.ReadJSON(filepath.Join(dir, fileInstance), &rec); err != nil {
		return nil, err
	}
	in := &instance{
		ep: ep, id: rec.ID, variant: rec.Variant, key: rec.Fleet, dir: dir, sock: rec.Socket,
		started: rec.StartedAt, generation: rec.Generation,
		readyCh: make(chan struct{}), failCh: make(chan struct{}), gone: make(chan struct{}), logDone: make(chan struct{}),
	}
	h, err := proc.Adopt(ctx, dir)
	if err != nil {
		if errors.Is(err, proc.ErrNotStarted) {
			os.RemoveAll(filepath.Dir(in.sock))
		}
		return nil, err
	}
	in.h = h
	select {
	case <-h.Done(): // it ended while the server was away
		os.RemoveAll(filepath.Dir(in.sock))
		os.RemoveAll(dir)
		return nil, nil
	default:
	}
	if m.cfg.GPUs != nil && len(rec.GPUs) > 0 {
		m.cfg.GPUs.Claim(gpuOwner(ep.name, in.id), rec.GPUs)
	}
	m.takeSlot(ep.name)
	ep.mu.Lock()
	ep.insts[in.id] = in
	ep.mu.Unlock()
	m.follow(in)
	return in, nil
}

func (m *Manager) releaseGPUs(ep, id string) {
	if m.cfg.GPUs != nil {
		m.cfg.GPUs.Release(gpuOwner(ep, id))
	}
}

// credential is the user instances run as, or nil.
func (m *Manager) credential() *syscall.Credential {
	if m.cfg.RunAs == nil {
		return nil
	}
	return &syscall.Credential{Uid: m.cfg.RunAs.UID, Gid: m.cfg.RunAs.GID, Groups: []uint32{}}
}

// instanceEnv is an instance's environment: the server's, filtered as
// training's is, with sagebox's S3 endpoint and the endpoint's key. Each
// container's Environment is in the containers file, over this.
func (m *Manager) instanceEnv(ep string) []string {
	environ := m.cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	env := toolkit.BaseEnv(environ)
	extra := map[string]string{}
	if u := m.cfg.SagemakerEndpoint; u != "" {
		extra["AWS_ENDPOINT_URL"], extra["AWS_ENDPOINT_URL_S3"], extra["S3_ENDPOINT_URL"] = u, u, u
	}
	extra["AWS_ACCESS_KEY_ID"], extra["AWS_SECRET_ACCESS_KEY"] = "sagebox", "sagebox"
	if m.cfg.Credentials != nil {
		extra["AWS_ACCESS_KEY_ID"], extra["AWS_SECRET_ACCESS_KEY"] = m.cfg.Credentials(ep)
	}
	if r := m.cfg.Region; r != "" {
		extra["AWS_REGION"], extra["AWS_DEFAULT_REGION"] = r, r
	}
	if m.cfg.Python != "" {
		extra["SAGEBOX_PYTHON"] = m.cfg.Python
	}
	extra["SAGEBOX_ENDPOINT_NAME"] = ep
	return append(env, toolkit.EnvironList(extra)...)
}

// follow starts the instance's goroutines: readiness then exit, and the
// log pump.
func (m *Manager) follow(in *instance) {
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.pumpLogs(m.ctx, in)
	}()
	go func() {
		defer m.wg.Done()
		m.watch(m.ctx, in)
	}()
}

// watch waits for the instance to become ready (or fail), then for it to
// end: an instance that ends unexpectedly leaves the route at once and
// the worker replaces it.
func (m *Manager) watch(ctx context.Context, in *instance) {
	ep := in.ep
	if err := m.waitReady(ctx, in); err != nil {
		if ctx.Err() != nil {
			return
		}
		in.err = err
		close(in.failCh)
	} else {
		ep.mu.Lock()
		in.ready = true
		ep.mu.Unlock()
		close(in.readyCh)
		ep.publish()
		ep.log.Info("instance ready", "instance", in.id, "variant", in.variant)
	}
	select {
	case <-in.h.Done():
	case <-ctx.Done():
		return
	}
	ep.mu.Lock()
	wasReady, stopping := in.ready, in.stopping
	in.ready = false
	ep.mu.Unlock()
	if wasReady && !stopping {
		ep.log.Warn("instance ended; replacing it", "instance", in.id, "variant", in.variant, "result", in.h.Result().String())
		ep.mu.Lock()
		delete(ep.insts, in.id)
		ep.mu.Unlock()
		ep.publish()
	}
	<-in.logDone
	m.freeSlot(ep.name)
	m.releaseGPUs(ep.name, in.id)
	os.RemoveAll(filepath.Dir(in.sock))
	os.RemoveAll(in.dir)
	removeEmptyParents(in.dir, m.epDir(ep.name))
	close(in.gone)
	if wasReady && !stopping {
		ep.poke()
	}
}

func removeEmptyParents(dir, stop string) {
	for d := filepath.Dir(dir); d != stop && strings.HasPrefix(d, stop); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			return
		}
	}
}

// health is the part of the model server's /_sagebox/health hosting reads.
type health struct {
	Ready   bool   `json:"ready"`
	Phase   string `json:"phase"`
	Message string `json:"message"`
	Workers []struct {
		LastError string `json:"last_error"`
	} `json:"workers"`
}

// waitReady polls /ping on the instance's socket every 25 ms until it
// answers 200. It fails when the model server reports that the model did
// not load (model_fn's exception, from /_sagebox/health), when the
// process ends first (its last output lines), or after StartupTimeout.
func (m *Manager) waitReady(ctx context.Context, in *instance) error {
	c := unixClient(in.sock, 2*time.Second)
	defer c.CloseIdleConnections()
	deadline := time.NewTimer(m.cfg.StartupTimeout)
	defer deadline.Stop()
	who := fmt.Sprintf("The primary container for production variant %s", in.variant)
	logs := fmt.Sprintf("see log stream %s of %s", LogStream(in.variant, in.id), LogGroup(in.ep.name))
	for {
		resp, err := c.Get("http://instance/ping")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			if h, ok := getHealth(c); ok && (h.Phase == "failed" || loadFailed(h)) {
				return fmt.Errorf("%s did not pass the ping health check: %s (%s)", who, h.Message, logs)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-in.h.Done():
			tail := strings.TrimSpace(strings.Join(in.h.Tail(5), "\n"))
			if tail != "" {
				tail = ": " + tail
			}
			return fmt.Errorf("%s did not pass the ping health check: its model server %s before it was ready%s (%s)", who, in.h.Result().String(), tail, logs)
		case <-deadline.C:
			msg := ""
			if h, ok := getHealth(c); ok && h.Message != "" {
				msg = " (" + h.Message + ")"
			}
			return fmt.Errorf("%s did not pass the ping health check within %s%s (%s)", who, m.cfg.StartupTimeout, msg, logs)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func loadFailed(h health) bool {
	for _, w := range h.Workers {
		if w.LastError != "" {
			return true
		}
	}
	return false
}

func getHealth(c *http.Client) (health, bool) {
	var h health
	resp, err := c.Get("http://instance/_sagebox/health")
	if err != nil {
		return h, false
	}
	defer resp.Body.Close()
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return h, false
	}
	return h, true
}

// unixClient is an HTTP client that dials the socket at path.
func unixClient(path string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
	}
}
