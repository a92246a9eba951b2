package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/modelserver"
)

// modelServerOptions are the flags of `sagebox model-server`.
type modelServerOptions struct {
	modelDir      string
	modelData     string
	host          string
	port          int
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

On a dedicated serving host, SAGEBOX_SCHED_BATCH=true runs the server and its
workers under Linux's SCHED_BATCH policy: they stop interrupting each other at
every hand-off of a request (about 1.2x the throughput under load), but no
longer preempt other busy programs either, so next to them each request waits
longer.`,
		Example: `  sagebox model-server --model-dir ./model
  SAGEMAKER_TS_BATCH_SIZE=8 sagebox model-server --model-data model.tar.gz --port 8080`,
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
	f.StringVar(&o.host, "host", "127.0.0.1", "address to listen on (0.0.0.0 for every interface)")
	f.IntVar(&o.port, "port", port, "port to listen on (default $SAGEMAKER_BIND_TO_PORT, else 8080)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "HOST:PORT for Prometheus metrics on a separate listener (off when empty)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 25*time.Second, "on SIGTERM, how long to let queued and running requests finish")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	return cmd
}

func runModelServer(ctx context.Context, cmd *cobra.Command, getenv func(string) string, o *modelServerOptions) error {
	logger, err := newLogger(&env{getenv: getenv, stderr: cmd.ErrOrStderr()}, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	cfg, err := modelserver.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	cfg.ModelDir, cfg.ModelData = o.modelDir, o.modelData
	cfg.ServerVersion = modelServerVersion()
	// Workers run under internal/proc's supervisor (this binary's hidden
	// exec-shim), so nothing they fork outlives the server.
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the worker supervisor: %w", err)
	}
	cfg.Supervisor = []string{self, "exec-shim"}
	srv, err := modelserver.New(cfg, logger)
	if err != nil {
		return err
	}

	addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	errLog := slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	httpSrv := srv.HTTPServer(errLog)
	serveErr := make(chan error, 2)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("model server listening", "addr", ln.Addr().String())

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

	if err := srv.Start(ctx); err != nil {
		stop()
		return err
	}
	go func() {
		if err := srv.WaitReady(ctx); err == nil {
			logger.Info("model loaded; ready for invocations")
		} else if ctx.Err() == nil {
			logger.Error("model not loaded; workers keep retrying", "error", err)
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

// modelServerVersion is the module version handlers see in
// context.system_properties["server_version"].
func modelServerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
