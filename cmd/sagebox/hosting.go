package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/capacity"
	"github.com/sagebox/sagebox/internal/hosting"
	"github.com/sagebox/sagebox/internal/metastore"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/training/local"
)

// hostingOptions are the server's flags for endpoint instances.
type hostingOptions struct {
	modelDataMaxMB      int64
	modelDataMaxEntries int
	startupTimeout      time.Duration
	drainTimeout        time.Duration
}

func (h *hostingOptions) flags(f *pflag.FlagSet) {
	f.Int64Var(&h.modelDataMaxMB, "endpoint-model-data-max-mb", 32768, "most MiB one container's model data may unpack to (a larger model.tar.gz fails the endpoint, naming this flag)")
	f.IntVar(&h.modelDataMaxEntries, "endpoint-model-data-max-entries", 1000000, "most files one container's model data may hold")
	f.DurationVar(&h.startupTimeout, "endpoint-startup-timeout", 10*time.Minute, "how long an endpoint instance may take to answer /ping (load the model) before the deployment fails")
	f.DurationVar(&h.drainTimeout, "endpoint-drain-timeout", time.Minute, "how long an update waits for an old instance's requests in flight before stopping it")
}

// hostingParts are the server's pieces the fleet manager uses.
type hostingParts struct {
	dataDir, self, endpoint, region string
	db                              *metastore.DB
	objects                         staging.Objects
	logs                            hosting.LogSink
	routes                          hosting.RouteTable
	pool                            *capacity.Pool
	instance                        capacity.Resources // what one instance takes: the same as a training host
	gpus                            hosting.GPUs
	runAs                           *local.RunAs
	keys                            *jobKeys // nil without auth
	stopGrace                       time.Duration
	logger                          *slog.Logger
}

// newHosting builds the endpoint fleet manager; call Recover before
// serving and Close at shutdown (instances keep running).
func (h *hostingOptions) newHosting(p hostingParts) (*hosting.Manager, error) {
	if h.modelDataMaxMB < 1 || h.modelDataMaxEntries < 1 {
		return nil, fmt.Errorf("--endpoint-model-data-max-mb and --endpoint-model-data-max-entries must be positive")
	}
	cfg := hosting.Config{
		DataDir: p.dataDir, Store: p.db, NotFound: metastore.ErrNotFound, Objects: p.objects, Logs: p.logs,
		Routes: p.routes, Capacity: p.pool, InstanceResources: p.instance, GPUs: p.gpus,
		ModelServer: []string{p.self, "model-server"}, Supervisor: []string{p.self, "exec-shim"},
		SagemakerEndpoint: p.endpoint, Region: p.region,
		ModelDataLimits: archive.Limits{MaxBytes: h.modelDataMaxMB << 20, MaxEntries: h.modelDataMaxEntries},
		LimitsFrom:      "the server's --endpoint-model-data-max-mb / --endpoint-model-data-max-entries",
		StartupTimeout:  h.startupTimeout, DrainTimeout: h.drainTimeout, StopGrace: p.stopGrace,
		Logger: p.logger,
	}
	if p.keys != nil {
		cfg.Credentials = p.keys.endpointCredentials
	}
	if r := p.runAs; r != nil {
		// One user for every instance: with a uid range, its last uid,
		// which server.go keeps out of the jobs' range.
		cfg.RunAs = &hosting.RunAs{UID: r.UID, GID: r.GID}
		if r.Count > 0 {
			u := r.UID + uint32(r.Count) - 1
			cfg.RunAs = &hosting.RunAs{UID: u, GID: u}
		}
	}
	return hosting.New(cfg)
}
