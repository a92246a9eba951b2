package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sagebox/sagebox/internal/modelserver"
)

// modelServerOptions are the flags of `sagebox model-server`.
type modelServerOptions struct {
	modelDir      string
	modelData     string
	containers    string
	host          string
	port          int
	listen        string
	readyFD       int
	metricsAddr   string
	shutdownGrace time.Duration
	logLevel      string
	logFormat     string
}

func newModelServerCmd(getenv func(string) string) *cobra.Command {
	var o modelServerOptions
	cmd := &cobra.Command{
		Use:   "model-server",
		Short: "Serve a model with the SageMaker inference contract (GET /ping, POST /invocations)",
		Long: `Serves a SageMaker PyTorch model directory (model.pt and/or code/inference.py with
model_fn, input_fn, predict_fn, output_fn or transform_fn) or a model.tar.gz, the
way SageMaker's PyTorch inference containers do: GET /ping answers 200 once every
worker has loaded the model, POST /invocations runs the handlers.

Configuration comes from the same environment variables as in SageMaker:
SAGEMAKER_PROGRAM, SAGEMAKER_MODEL_SERVER_WORKERS, SAGEMAKER_MODEL_SERVER_TIMEOUT,
SAGEMAKER_STARTUP_TIMEOUT, SAGEMAKER_TS_BATCH_SIZE, SAGEMAKER_TS_MAX_BATCH_DELAY,
SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT, SAGEMAKER_MAX_PAYLOAD_IN_MB (or
TS_MAX_REQUEST_SIZE), SAGEBOX_QUEUE_SIZE (or TS_JOB_QUEUE_SIZE) and
SAGEBOX_INCLUDE_TRACEBACK. Each acts alone: setting one SAGEMAKER_TS_* variable
does not reset the others. SAGEBOX_PYTHON chooses the interpreter. The batch
size is at most 1024; an answer may carry up to 4 times the payload limit (6 MB
by default), and a larger one fails alone with a 500 that says so.

Memory: a worker whose handler raises MemoryError answers that request 507
(saying it is being restarted) and is replaced at once; while no worker has the
model loaded, /ping answers 503 with the reason. SAGEBOX_WORKER_MAX_RSS_MB=N
also replaces a worker, after the request it was running, once its peak RSS
passed N MiB (off by default). --model-data is unpacked only up to
SAGEBOX_MODEL_DATA_MAX_MB (default 32768, i.e. 32 GiB) and
SAGEBOX_MODEL_DATA_MAX_ENTRIES (default 1000000); past either the server
refuses to start and names the limit.

On a dedicated serving host, SAGEBOX_SCHED_BATCH=true runs the server and its
workers under Linux's SCHED_BATCH policy: they stop interrupting each other at
every hand-off of a request (about 1.2x the throughput under load), but no
longer preempt other busy programs either, so next to them each request waits
longer. With CPU workers the server sizes its Go scheduler to half the CPUs
unless GOMAXPROCS is set.

Multi-container models (--containers FILE, instead of --model-dir/--model-data):
one server process for the containers of one SageMaker model, each with its own
workers and its own configuration, read from its env over this process's
environment. FILE is JSON:
  {"mode": "Serial" | "Direct",
   "containers": [{"hostname": "c1", "model_dir": "/abs/dir",
                   "env": {"SAGEMAKER_PROGRAM": "inference.py"}}, ...]}
with 1 to 15 containers (distinct hostnames). Serial is an inference pipeline:
container N's answer (body and Content-Type) is container N+1's request; the
client's Accept goes to the last container only (the others answer in their
SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT, application/json by default); every
container sees the client's other headers (custom attributes included) and,
from Python, the client's request as context.original_request. Direct sends a
request to the container its X-Amzn-SageMaker-Target-Container-Hostname header
names (400 when it names none or an unknown one). A failed answer names its
container in the X-Sagebox-Container response header; /ping is healthy once
every container is, and /_sagebox/health names the container that is not.
One container is served exactly as --model-dir would serve it.

Listening: --host and --port (default $SAGEMAKER_BIND_TO_PORT, else 8080), or
--listen HOST:PORT, or --listen unix:PATH for a Unix socket (a stale socket file
left by a dead server is replaced; the file is removed at exit). Port 0 picks a
free port; the address chosen is logged ("model server listening").

Readiness handshake (--ready-fd N), for a parent process that starts the server
and must learn its address and readiness without polling: the server writes ONE
JSON line to file descriptor N, then closes it (the descriptor is not passed on
to the workers, so the parent sees end-of-file right after the line):
  {"ready":true,"addr":"127.0.0.1:43121"}
when every worker has loaded the model (GET /ping answers 200 at that moment);
  {"ready":false,"addr":"...","error":"..."}
when it will not become ready on its own: the preparation failed (bad archive,
pip install failed; the process then exits non-zero), a worker's model_fn
raised (the process keeps running and its workers keep retrying with backoff:
/ping answers 500 until a retry succeeds), or it was stopped first. "addr" is
in the form --listen takes (unix:PATH for a socket) and is empty when listening
failed. The line is written once the socket is listening, so the parent may
connect as soon as it has read it.`,
		Example: `  sagebox model-server --model-dir ./model
  SAGEMAKER_TS_BATCH_SIZE=8 sagebox model-server --model-data model.tar.gz --port 8080
  sagebox model-server --model-dir ./model --listen unix:/tmp/model.sock --ready-fd 3 3>ready.json
  sagebox model-server --containers pipeline.json --port 8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runModelServer(cmd.Context(), cmd, getenv, &o)
		},
	}
	port, err := modelserver.Port(getenv)
	if err != nil {
		port = modelserver.DefaultPort // ConfigFromEnv reports the bad value
	}
	f := cmd.Flags()
	f.StringVar(&o.modelDir, "model-dir", "", "model directory (like /opt/ml/model)")
	f.StringVar(&o.modelData, "model-data", "", "model.tar.gz to extract and serve instead of --model-dir")
	f.StringVar(&o.containers, "containers", "", "JSON file of a multi-container model (serial pipeline or Direct), instead of --model-dir/--model-data")
	f.StringVar(&o.host, "host", "127.0.0.1", "address to listen on (0.0.0.0 for every interface)")
	f.IntVar(&o.port, "port", port, "port to listen on, 0 for a free one (default $SAGEMAKER_BIND_TO_PORT, else 8080)")
	f.StringVar(&o.listen, "listen", "", "HOST:PORT or unix:PATH to listen on, instead of --host and --port")
	f.IntVar(&o.readyFD, "ready-fd", -1, "file descriptor to write one JSON line to once ready (or failed), then close")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "HOST:PORT for Prometheus metrics on a separate listener (off when empty)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 25*time.Second, "on SIGTERM, how long to let queued and running requests finish")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	return cmd
}

func runModelServer(ctx context.Context, cmd *cobra.Command, getenv func(string) string, o *modelServerOptions) (err error) {
	ready, err := newReadyReporter(o.readyFD)
	if err != nil {
		return err
	}
	// Whatever ends the command before the server is ready says so.
	defer func() {
		if err != nil {
			ready.report(false, err)
		} else {
			ready.report(false, errors.New("the model server stopped before the model loaded"))
		}
	}()
	f := cmd.Flags()
	if o.listen != "" && (f.Changed("host") || f.Changed("port")) {
		return errors.New("give --listen or --host/--port, not both")
	}
	logger, err := newLogger(&env{getenv: getenv, stderr: cmd.ErrOrStderr()}, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	mode, hosts, cfgs, err := modelServerConfigs(getenv, o)
	if err != nil {
		return err
	}
	tuning, err := tuningFromEnv(getenv)
	if err != nil {
		return err
	}
	// Process-wide tuning depends on where the workers run, so the GPUs
	// are counted here, once, and the count handed to the servers.
	gpus := modelserver.CountGPUs(ctx, os.LookupEnv)
	// Workers run under internal/proc's supervisor (this binary's hidden
	// exec-shim), so nothing they fork outlives the server.
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the worker supervisor: %w", err)
	}
	for i := range cfgs {
		cfgs[i].ServerVersion = modelServerVersion()
		if cfgs[i].GPUs < 0 {
			cfgs[i].GPUs = gpus
		}
		cfgs[i].Supervisor = []string{self, "exec-shim"}
	}
	srv, err := modelserver.NewGroup(mode, hosts, cfgs, logger)
	if err != nil {
		return err
	}

	listen := o.listen
	if listen == "" {
		listen = net.JoinHostPort(o.host, strconv.Itoa(o.port))
	}
	ln, addr, err := listenModelServer(listen)
	if err != nil {
		return err
	}
	ready.addr = addr
	errLog := slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	httpSrv := srv.HTTPServer(errLog)
	serveErr := make(chan error, 2)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("model server listening", "addr", addr)

	var metricsSrv *http.Server
	if o.metricsAddr != "" {
		mln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			httpSrv.Shutdown(context.Background())
			return fmt.Errorf("listen for metrics on %s: %w", o.metricsAddr, err)
		}
		metricsSrv = &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 30 * time.Second, ErrorLog: errLog}
		go func() { serveErr <- metricsSrv.Serve(mln) }()
		logger.Info("metrics listening", "addr", mln.Addr().String())
	}

	stop := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), o.shutdownGrace)
		defer cancel()
		httpDone := make(chan error, 1)
		go func() { httpDone <- httpSrv.Shutdown(sctx) }()
		err := srv.Shutdown(sctx)
		if herr := <-httpDone; err == nil && herr != nil && !errors.Is(herr, context.DeadlineExceeded) {
			err = fmt.Errorf("stop http server: %w", herr)
		}
		if metricsSrv != nil {
			metricsSrv.Close()
		}
		return err
	}

	// Process-wide tuning is the command's, not the library's: before the
	// workers start, so that they inherit the scheduling policy.
	tuning.apply(logger, gpus)

	if err := srv.Start(ctx); err != nil {
		stop()
		return err
	}
	go func() {
		if err := srv.WaitReady(ctx); err == nil {
			logger.Info("model loaded; ready for invocations")
			ready.report(true, nil)
		} else if ctx.Err() == nil {
			logger.Error("model not loaded; workers keep retrying", "error", err)
			ready.report(false, err)
		}
	}()

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", o.shutdownGrace)
	case err := <-serveErr:
		stop()
		return fmt.Errorf("serve: %w", err)
	}
	return stop()
}

// modelServerConfigs returns the model's mode, container hostnames and
// one Config per container: from --containers FILE (each container's env
// over the process's), or the one model of --model-dir/--model-data.
func modelServerConfigs(getenv func(string) string, o *modelServerOptions) (string, []string, []modelserver.Config, error) {
	if o.containers == "" {
		cfg, err := modelserver.ConfigFromEnv(getenv)
		if err != nil {
			return "", nil, nil, err
		}
		cfg.ModelDir, cfg.ModelData = o.modelDir, o.modelData
		return "", []string{""}, []modelserver.Config{cfg}, nil
	}
	if o.modelDir != "" || o.modelData != "" {
		return "", nil, nil, errors.New("give --containers or --model-dir/--model-data, not both")
	}
	f, err := modelserver.ReadContainersFile(o.containers)
	if err != nil {
		return "", nil, nil, err
	}
	cfgs, err := f.Configs(os.Environ())
	if err != nil {
		return "", nil, nil, err
	}
	hosts := make([]string, len(f.Containers))
	for i, c := range f.Containers {
		hosts[i] = c.Hostname
	}
	return f.Mode, hosts, cfgs, nil
}

// listenModelServer listens on HOST:PORT or unix:PATH and returns the
// address it got in the same form (the port chosen for port 0).
func listenModelServer(addr string) (net.Listener, string, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, ln.Addr().String(), nil
	}
	if path == "" {
		return nil, "", errors.New("--listen unix:PATH: the path is empty")
	}
	// A socket file left by a server that died is replaced; one a live
	// server answers on is not.
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, "", fmt.Errorf("listen on unix:%s: another server is listening there", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", fmt.Errorf("listen on unix:%s: %w", path, err)
	}
	return ln, "unix:" + path, nil
}

// readyReporter writes the readiness handshake (--ready-fd) once.
type readyReporter struct {
	f    *os.File // nil without --ready-fd
	addr string
	once sync.Once
}

func newReadyReporter(fd int) (*readyReporter, error) {
	r := &readyReporter{}
	if fd < 0 {
		return r, nil
	}
	if fd <= 2 {
		return nil, fmt.Errorf("--ready-fd %d: use a descriptor above 2 (0-2 are stdin, stdout and stderr)", fd)
	}
	// The descriptor was inherited without close-on-exec; set it, so that
	// the workers do not hold it open and the parent sees end-of-file as
	// soon as the line is written.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("--ready-fd %d: not an open file descriptor: %w", fd, err)
	}
	r.f = os.NewFile(uintptr(fd), "ready-fd")
	return r, nil
}

// readyLine is the handshake's JSON line.
type readyLine struct {
	Ready bool   `json:"ready"`
	Addr  string `json:"addr"`
	Error string `json:"error,omitempty"`
}

// report writes the line on its first call and closes the descriptor.
func (r *readyReporter) report(ready bool, err error) {
	if r.f == nil {
		return
	}
	r.once.Do(func() {
		line := readyLine{Ready: ready, Addr: r.addr}
		if err != nil {
			line.Error = err.Error()
		}
		b, _ := json.Marshal(line)
		r.f.Write(append(b, '\n'))
		r.f.Close()
	})
}

// modelServerVersion is the module version handlers see in
// context.system_properties["server_version"].
func modelServerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
