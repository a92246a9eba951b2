// Package modelserver is sagebox's inference server: the SageMaker
// container contract (GET /ping, POST /invocations) in front of a pool of
// Python worker processes that run the user's handlers.
//
// Requests wait in one bounded queue (internal/batch), from which each
// worker's goroutine takes dynamic batches and sends each batch to its
// process as one INFER frame over a Unix socket (internal/wire). A worker
// that crashes or times out fails only the batch it holds and is restarted
// with backoff. /ping is healthy only once every worker has loaded the
// model.
//
// A Server is used either by `sagebox model-server` or embedded in-process
// by an endpoint: New, then serve HTTPServer, then Start, then Shutdown. It
// never changes process-wide state (GOMAXPROCS, scheduling policy): that is
// the command's to do, and workers inherit whatever their process has.
package modelserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/batch"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/pyruntime"
)

// pipelineDepth is how many waiting requests a worker takes at once when
// batching is off. Measured on 2 CPUs, unbatched at c=32 with the
// benchmark's MLP: 8 gives 1.37x the throughput of 1, and 1.16x that of 4.
const pipelineDepth = 8

// pipelineQuick is the handler time under which a worker keeps several
// waiting requests to itself. Slower requests gain nothing from sharing a
// wake-up, and a worker holding them makes the others wait.
const pipelineQuick = 2 * time.Millisecond

// Server is one model behind the SageMaker inference contract.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	queue   *batch.Queue[*call]
	metrics *metrics

	// ctx is the workers' lifetime: cancelled when Shutdown stops them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	calls    sync.Pool // *call
	nextID   atomic.Uint64
	pending  atomic.Int64 // invocations accepted and not yet answered
	loaded   atomic.Int32 // workers with the model loaded
	idle     atomic.Int32 // workers waiting for requests
	stopping atomic.Bool

	// answerLimit is the most bytes one answer may carry (body, content
	// type and headers; error text is cut to fit), told to workers in LOAD
	// so that they fail an oversized answer alone; resultFrameLimit is the largest
	// RESULT frame read from a worker, a batch of such answers plus framing.
	answerLimit      int64
	resultFrameLimit int

	restartWait func(ctx context.Context, d time.Duration) bool // Config.restartWait or sleepCtx

	// Set by Start before workers run; read-only afterwards.
	modelDir    string
	codeDir     string
	python      string
	workerEnv   []string
	workerCount int
	sockDir     string
	extractDir  string

	// startMu is held by Start for its whole run, so Shutdown can wait
	// for it rather than race with it.
	startMu sync.Mutex

	mu      sync.Mutex
	phase   string
	err     error // a Start failure
	workers []*worker
	changed chan struct{} // closed and replaced on every health change
}

// Phases of a server, as Health reports them.
const (
	PhaseNew       = "new"
	PhasePreparing = "preparing"
	PhaseRunning   = "running"
	PhaseFailed    = "failed"
	PhaseStopping  = "stopping"
	PhaseStopped   = "stopped"
)

// New checks cfg and returns a Server that is not yet running. Its Handler
// can be served at once: /ping answers 503 until the model has loaded.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:     cfg,
		logger:  serverLogger(logger, cfg.Container),
		ctx:     ctx,
		cancel:  cancel,
		phase:   PhaseNew,
		changed: make(chan struct{}),
	}
	// With batching off a worker takes up to pipelineDepth waiting
	// requests at once and sends them as batches of one (worker.pipeline).
	take, delay := cfg.BatchSize, cfg.MaxBatchDelay
	if cfg.BatchSize == 1 {
		take, delay = pipelineDepth, 0
	}
	s.queue = batch.New[*call](batch.Config{Capacity: cfg.QueueSize, BatchSize: take, MaxDelay: delay})
	s.answerLimit, s.resultFrameLimit = answerLimits(cfg.MaxPayload, cfg.BatchSize)
	s.metrics = newMetrics(
		func() float64 { return float64(s.queue.Len()) },
		func() float64 { return float64(s.loaded.Load()) },
		cfg.BatchSize)
	s.calls.New = func() any { return newCall() }
	s.restartWait = cfg.restartWait
	if s.restartWait == nil {
		s.restartWait = sleepCtx
	}
	return s, nil
}

// Config returns the server's configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Start prepares the model (extracts ModelData, installs
// code/requirements.txt), finds the interpreter and starts the workers. It
// returns once the worker processes are starting; Ready and WaitReady say
// when they have loaded the model. ctx bounds the preparation only; the
// workers run until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	if s.phase != PhaseNew {
		s.mu.Unlock()
		return fmt.Errorf("start model server: already %s", s.phase)
	}
	s.phase = PhasePreparing
	s.mu.Unlock()
	s.healthChanged()

	err := s.prepare(ctx)
	s.mu.Lock()
	if err == nil && s.stopping.Load() {
		err = errors.New("start model server: shut down while starting")
	}
	if err != nil {
		s.phase, s.err = PhaseFailed, err
		s.mu.Unlock()
		s.removeTemp()
		s.healthChanged()
		return err
	}
	s.phase = PhaseRunning
	for _, w := range s.workers {
		s.wg.Go(func() { w.run(s.ctx) })
	}
	s.mu.Unlock()
	s.healthChanged()
	return nil
}

// prepare does everything before the workers start.
func (s *Server) prepare(ctx context.Context) error {
	cfg := &s.cfg
	cacheDir := cfg.CacheDir
	if cacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			d = os.TempDir()
		}
		cacheDir = filepath.Join(d, "sagebox")
	}

	s.modelDir = cfg.ModelDir
	if cfg.ModelData != "" {
		if err := os.MkdirAll(filepath.Join(cacheDir, "models"), 0o755); err != nil {
			return fmt.Errorf("create model cache: %w", err)
		}
		sweepTempDirs(filepath.Join(cacheDir, "models"), "model-", s.logger)
		dir, err := ownedTempDir(filepath.Join(cacheDir, "models"), "model-")
		if err != nil {
			return fmt.Errorf("create model dir: %w", err)
		}
		s.extractDir = dir
		s.logger.Info("extracting model", "model_data", cfg.ModelData, "dir", dir)
		if err := archive.ExtractFileLimited(ctx, cfg.ModelData, dir, cfg.ModelDataLimits); err != nil {
			var le *archive.LimitError
			if errors.As(err, &le) {
				limit := fmt.Sprintf("SAGEBOX_MODEL_DATA_MAX_MB=%d", le.Max>>20)
				if le.What == "entries" {
					limit = fmt.Sprintf("SAGEBOX_MODEL_DATA_MAX_ENTRIES=%d", le.Max)
				}
				return fmt.Errorf("extract %s: %w: the model data limit %s was hit; raise it to serve this model", cfg.ModelData, err, limit)
			}
			return fmt.Errorf("extract %s: %w", cfg.ModelData, err)
		}
		s.modelDir = dir
	}
	abs, err := filepath.Abs(s.modelDir)
	if err != nil {
		return fmt.Errorf("resolve model dir: %w", err)
	}
	s.modelDir = abs
	if st, err := os.Stat(s.modelDir); err != nil || !st.IsDir() {
		return fmt.Errorf("model directory %s: not a directory", s.modelDir)
	}
	s.codeDir = filepath.Join(s.modelDir, "code")
	if cfg.CodeDir != "" {
		if s.codeDir, err = filepath.Abs(cfg.CodeDir); err != nil {
			return fmt.Errorf("resolve code dir: %w", err)
		}
		if st, err := os.Stat(s.codeDir); err != nil || !st.IsDir() {
			return fmt.Errorf("SAGEMAKER_SUBMIT_DIRECTORY=%s: not a directory (a local directory holding the code; "+
				"leave it unset, or set it to /opt/ml/model/code, for the model's code/)", cfg.CodeDir)
		}
	}

	getenv := envLookup(cfg.Env)
	s.python = cfg.Python
	if s.python == "" {
		py, err := pyruntime.Find(ctx, getenv)
		if err != nil {
			return fmt.Errorf("find python: %w", err)
		}
		s.logger.Info("using python", "python", py.Path, "chosen_by", py.Source)
		s.python = py.Path
	}
	runtimeDir := cfg.RuntimeDir
	if runtimeDir == "" {
		runtimeDir, err = pyruntime.Unpack(filepath.Join(cacheDir, "runtime"))
		if err != nil {
			return fmt.Errorf("unpack python runtime: %w", err)
		}
	}
	req := filepath.Join(s.codeDir, "requirements.txt")
	if _, err := os.Stat(req); err == nil {
		s.logger.Info("installing requirements", "file", req)
		out := proc.NewLineWriter("pip", func(stream string, line []byte) {
			s.logger.Info(string(line), "stream", stream)
		})
		py, err := pyruntime.InstallRequirements(ctx, s.python, req, filepath.Join(cacheDir, "venvs"), cfg.Env, out)
		out.Flush()
		if err != nil {
			return fmt.Errorf("install %s: %w", req, err)
		}
		s.python = py
	}

	base := cfg.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		if workerInherits(kv) {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PYTHONPATH="+pyruntime.PythonPath(getenv("PYTHONPATH"), runtimeDir, s.codeDir),
		"PYTHONUNBUFFERED=1")
	s.workerEnv = env

	gpus := cfg.GPUs
	if gpus < 0 {
		gpus = CountGPUs(ctx, envLookupSet(cfg.Env))
	}
	n := cfg.Workers
	if n == 0 {
		n = gpus
		if n == 0 {
			n = runtime.NumCPU()
		}
	}
	// Socket paths must stay under ~100 bytes, so they live in a short
	// temporary directory rather than under the cache.
	sweepTempDirs(os.TempDir(), "sagebox-ms-", s.logger)
	s.sockDir, err = ownedTempDir(os.TempDir(), "sagebox-ms-")
	if err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	s.workerCount = n
	s.mu.Lock()
	for i := range n {
		gpu := -1
		if gpus > 0 {
			gpu = i % gpus
		}
		s.workers = append(s.workers, &worker{
			id: i, gpu: gpu, srv: s, state: WorkerStarting,
			logger: s.logger.With("worker", i),
			// Until it has timed a request, a worker takes one at a time.
			handlerAvg: pipelineQuick,
		})
	}
	s.mu.Unlock()
	s.logger.Info("starting workers", "workers", n, "gpus", gpus, "model_dir", s.modelDir,
		"batch_size", cfg.BatchSize, "max_batch_delay", cfg.MaxBatchDelay)
	return nil
}

// serverLogger is the server's logger: a container's carries its hostname.
func serverLogger(l *slog.Logger, container string) *slog.Logger {
	l = l.With("system", "modelserver")
	if container != "" {
		l = l.With("container", container)
	}
	return l
}

// envLookup returns a getenv over env, or os.Getenv when env is nil.
func envLookup(env []string) func(string) string {
	lookup := envLookupSet(env)
	return func(key string) string {
		v, _ := lookup(key)
		return v
	}
}

// envLookupSet is envLookup that also tells whether key is set (to ""
// perhaps), like os.LookupEnv.
func envLookupSet(env []string) func(string) (string, bool) {
	if env == nil {
		return os.LookupEnv
	}
	return func(key string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], key+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}

// Shutdown stops accepting invocations, waits until those already accepted
// (queued or in a worker) are answered or ctx ends, then stops the workers
// and removes temporary files. Invocations still unanswered when ctx ends
// get a 503. It returns ctx's error when the drain was cut short.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	s.startMu.Lock() // a Start in progress finishes first
	defer s.startMu.Unlock()
	s.mu.Lock()
	if s.phase == PhaseStopped {
		s.mu.Unlock()
		return nil
	}
	s.phase = PhaseStopping
	s.mu.Unlock()
	s.healthChanged()
	s.queue.Close()

	var drainErr error
	tick := time.NewTicker(5 * time.Millisecond)
	for s.pending.Load() > 0 && drainErr == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			drainErr = fmt.Errorf("shutdown: %d invocations unanswered: %w", s.pending.Load(), ctx.Err())
		}
	}
	tick.Stop()

	s.cancel()
	s.failQueued()
	s.wg.Wait()
	s.failQueued() // what a stopping worker put back
	s.removeTemp()
	s.mu.Lock()
	s.phase = PhaseStopped
	s.mu.Unlock()
	s.healthChanged()
	s.logger.Info("model server stopped")
	return drainErr
}

// failQueued answers whatever is still queued: it will not reach a worker.
func (s *Server) failQueued() {
	for {
		calls, err := s.queue.Next(context.Background(), nil)
		if err != nil {
			return
		}
		for _, c := range calls {
			c.err = errorf(503, TypeUnavailable, "the model server shut down before a worker took this request")
			c.done <- struct{}{}
		}
	}
}

// tempDirs are the server's temporary directories: the socket directory
// and an extracted model. Worker supervisors remove them if the server is
// killed (see tempdirs.go).
func (s *Server) tempDirs() []string {
	var dirs []string
	for _, d := range []string{s.sockDir, s.extractDir} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// removeTemp removes the socket directory and an extracted model.
func (s *Server) removeTemp() {
	if s.sockDir != "" {
		os.RemoveAll(s.sockDir)
	}
	if s.extractDir != "" {
		os.RemoveAll(s.extractDir)
	}
}

// answerLimits returns the most bytes one answer may carry and the largest
// RESULT frame for a batch of batchSize such answers. An answer may be
// larger than its request (JSON of a tensor is bigger than its input):
// 4× the payload limit, and never less than 4× the default limit. The
// frame adds 1 MiB for its framing (about 40 bytes per answer), and the
// whole stays within the frame format's u32 length.
func answerLimits(maxPayload int64, batchSize int) (answer int64, frame int) {
	const framing = 1 << 20
	answer = max(maxPayload, DefaultMaxPayload) * 4
	if most := (math.MaxUint32 - framing) / int64(batchSize); answer > most {
		answer = most
	}
	return answer, int(answer*int64(batchSize) + framing)
}

// workerInherits reports whether a worker gets the KEY=VALUE entry kv of the
// front end's environment: not PYTHONPATH or PYTHONUNBUFFERED (set for the
// worker), and no SAGEBOX_* variable (the server's settings, credentials
// among them) but the two the worker reads itself.
func workerInherits(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	switch k {
	case "PYTHONPATH", "PYTHONUNBUFFERED":
		return false
	case "SAGEBOX_LOG_LEVEL", "SAGEBOX_WORKER_PROFILE":
		return true
	}
	return !strings.HasPrefix(k, "SAGEBOX_")
}
