package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxContainers is the most containers a model may have (CreateModel's
// limit).
const MaxContainers = 15

// ContainersFile is what `sagebox model-server --containers FILE` reads:
// the containers of one model, each with its own model directory and
// environment overlay (over the process's environment), and how requests
// reach them.
//
//	{"mode": "Serial" | "Direct",
//	 "containers": [{"hostname": "c1", "model_dir": "/abs/dir",
//	                 "env": {"SAGEMAKER_PROGRAM": "inference.py"}}]}
//
// mode may be left out (Serial). One container is served exactly as a
// single model (no HeaderContainer, no routing by hostname).
type ContainersFile struct {
	Mode       string          `json:"mode,omitempty"`
	Containers []ContainerSpec `json:"containers"`
}

// ContainerSpec is one container of a ContainersFile.
type ContainerSpec struct {
	// Hostname names the container in errors, health and Direct routing;
	// SageMaker's ContainerHostname rules (1-63 letters, digits and
	// inner hyphens). It may be left out for a single container.
	Hostname string `json:"hostname,omitempty"`
	// ModelDir is the container's model directory (/opt/ml/model).
	ModelDir string `json:"model_dir"`
	// Env is the container's environment (SAGEMAKER_PROGRAM, worker and
	// batch settings, ...), over the process's.
	Env map[string]string `json:"env,omitempty"`
}

// hostnamePattern is CreateModel's ContainerHostname pattern.
var hostnamePattern = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)

// ReadContainersFile reads and checks a ContainersFile.
func ReadContainersFile(path string) (*ContainersFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--containers: %w", err)
	}
	f, err := ParseContainersFile(b)
	if err != nil {
		return nil, fmt.Errorf("--containers %s: %w", path, err)
	}
	return f, nil
}

// ParseContainersFile decodes and checks a ContainersFile. Unknown fields
// are errors, so that a misspelt one is not silently ignored.
func ParseContainersFile(b []byte) (*ContainersFile, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f ContainersFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a containers file (JSON {\"mode\": \"Serial\"|\"Direct\", \"containers\": [{\"hostname\", \"model_dir\", \"env\"}]}): %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a containers file: more than one JSON value")
	}
	switch f.Mode {
	case "":
		f.Mode = ModeSerial
	case ModeSerial, ModeDirect:
	default:
		return nil, fmt.Errorf("mode %q: must be %q or %q", f.Mode, ModeSerial, ModeDirect)
	}
	n := len(f.Containers)
	if n == 0 || n > MaxContainers {
		return nil, fmt.Errorf("%d containers: a model has 1 to %d", n, MaxContainers)
	}
	seen := map[string]int{}
	for i := range f.Containers {
		c := &f.Containers[i]
		if c.Hostname == "" && n == 1 {
			c.Hostname = "primary"
		}
		switch {
		case c.Hostname == "":
			return nil, fmt.Errorf("container %d: hostname is required when a model has several containers", i+1)
		case !hostnamePattern.MatchString(c.Hostname):
			return nil, fmt.Errorf("container %d: hostname %q: use 1 to 63 letters, digits and inner hyphens", i+1, c.Hostname)
		case c.ModelDir == "":
			return nil, fmt.Errorf("container %d (%s): model_dir is required", i+1, c.Hostname)
		}
		if j, dup := seen[strings.ToLower(c.Hostname)]; dup {
			return nil, fmt.Errorf("containers %d and %d share the hostname %q", j+1, i+1, c.Hostname)
		}
		seen[strings.ToLower(c.Hostname)] = i
		for k := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("container %d (%s): env name %q is not a variable name", i+1, c.Hostname, k)
			}
		}
	}
	return &f, nil
}

// Configs returns each container's Config: ConfigFromEnv over base (the
// process's environment, KEY=VALUE) with the container's env on top, its
// model directory, and, in a Serial model, the original request for every
// container after the first. Errors name the container.
func (f *ContainersFile) Configs(base []string) ([]Config, error) {
	cfgs := make([]Config, len(f.Containers))
	for i, c := range f.Containers {
		env := make([]string, 0, len(base)+len(c.Env))
		env = append(env, base...)
		for k, v := range c.Env {
			env = append(env, k+"="+v) // later entries win (envLookup)
		}
		cfg, err := ConfigFromEnv(envLookup(env))
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c.Hostname, err)
		}
		cfg.Env = env
		cfg.ModelDir = c.ModelDir
		if len(f.Containers) > 1 {
			cfg.Container = c.Hostname
			cfg.OriginalRequest = f.Mode == ModeSerial && i > 0
		}
		cfgs[i] = cfg
	}
	return cfgs, nil
}

// Group is the Servers of one model behind one listener: a single Server,
// or the containers of a multi-container model in front of a Serial or a
// Direct. It has a Server's lifecycle: NewGroup, serve HTTPServer, Start,
// Shutdown.
type Group struct {
	mode    string
	hosts   []string
	servers []*Server
	inv     Invoker
	metrics *metrics
	logger  *slog.Logger
}

// NewGroup builds one Server per container; cfgs[i] is the Config of the
// container named hosts[i]. With one container the Group is that Server.
func NewGroup(mode string, hosts []string, cfgs []Config, logger *slog.Logger) (*Group, error) {
	if len(hosts) != len(cfgs) || len(cfgs) == 0 {
		return nil, fmt.Errorf("model server group: %d hostnames for %d containers", len(hosts), len(cfgs))
	}
	if logger == nil {
		logger = slog.Default()
	}
	g := &Group{mode: mode, hosts: hosts, logger: logger.With("system", "modelserver")}
	cs := make([]Container, len(cfgs))
	for i, cfg := range cfgs {
		s, err := New(cfg, logger)
		if err != nil {
			if len(cfgs) > 1 {
				err = fmt.Errorf("container %s: %w", hosts[i], err)
			}
			return nil, err
		}
		g.servers = append(g.servers, s)
		cs[i] = Container{Hostname: hosts[i], Invoker: s}
	}
	switch {
	case len(cs) == 1:
		g.inv, g.metrics = g.servers[0], g.servers[0].metrics
		return g, nil
	case mode == ModeDirect:
		g.inv = NewDirect(cs)
	case mode == ModeSerial || mode == "":
		g.inv = NewSerial(cs)
	default:
		return nil, fmt.Errorf("model server group: mode %q: must be %q or %q", mode, ModeSerial, ModeDirect)
	}
	maxBatch := 1
	for _, s := range g.servers {
		maxBatch = max(maxBatch, s.cfg.BatchSize)
	}
	g.metrics = newMetrics(
		func() float64 {
			n := 0
			for _, s := range g.servers {
				n += s.queue.Len()
			}
			return float64(n)
		},
		func() float64 {
			n := int32(0)
			for _, s := range g.servers {
				n += s.loaded.Load()
			}
			return float64(n)
		}, maxBatch)
	regs := make([]*prometheus.Registry, len(g.servers))
	for i, s := range g.servers {
		regs[i] = s.metrics.reg
	}
	g.metrics.gatherer = groupGatherer(g.metrics.reg, hosts, regs)
	return g, nil
}

// Servers returns the containers' servers, in order.
func (g *Group) Servers() []*Server { return g.servers }

// Invoke runs req (the Invoker the HTTP routes serve).
func (g *Group) Invoke(ctx context.Context, req *Request, resp *Response) error {
	return g.inv.Invoke(ctx, req, resp)
}

// Health is the model's health: ready when every container is.
func (g *Group) Health() Health { return g.inv.Health() }

// HTTPServer returns the HTTP server for the inference routes. A request
// may be as large as the first container takes (Serial) or the largest
// any takes (Direct; each container checks its own limit).
func (g *Group) HTTPServer(errorLog *log.Logger) *HTTPServer {
	if len(g.servers) == 1 {
		return g.servers[0].HTTPServer(errorLog)
	}
	first := g.servers[0].cfg
	o := routeOptions{logger: g.logger, metrics: g.metrics, maxPayload: first.MaxPayload, includeTraceback: first.IncludeTraceback}
	if g.mode == ModeDirect {
		for _, s := range g.servers {
			o.maxPayload = max(o.maxPayload, s.cfg.MaxPayload)
			o.includeTraceback = o.includeTraceback || s.cfg.IncludeTraceback
		}
	}
	return newHTTPServer(g, o, errorLog)
}

// MetricsHandler returns the Prometheus handler for the model's metrics:
// a single model's own; for several containers, the invocations of the
// whole model with queue depth and loaded workers summed over them, and
// the queue, worker, handler, batch and restart metrics of each container
// labelled container="<hostname>".
func (g *Group) MetricsHandler() http.Handler { return g.metrics.handler() }

// Start starts every container's server in order; the first failure is
// returned, naming its container (the caller then shuts the group down).
func (g *Group) Start(ctx context.Context) error {
	for i, s := range g.servers {
		if err := s.Start(ctx); err != nil {
			return g.named(i, err)
		}
	}
	return nil
}

// WaitReady blocks until every container is ready (nil), or one cannot
// serve its model or ctx ends (why, naming the container).
func (g *Group) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(g.servers))
	for i, s := range g.servers {
		go func() { errs <- g.named(i, s.WaitReady(ctx)) }()
	}
	var first error
	for range g.servers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// Shutdown shuts every container's server down at once (Server.Shutdown).
func (g *Group) Shutdown(ctx context.Context) error {
	errs := make([]error, len(g.servers))
	var wg sync.WaitGroup
	for i, s := range g.servers {
		wg.Go(func() { errs[i] = g.named(i, s.Shutdown(ctx)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// named prefixes a container's error with its hostname when there are
// several.
func (g *Group) named(i int, err error) error {
	if err == nil || len(g.servers) == 1 {
		return err
	}
	return fmt.Errorf("container %s: %w", g.hosts[i], err)
}
