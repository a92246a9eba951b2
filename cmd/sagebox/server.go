package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sagebox/sagebox/internal/bodytimeout"
	"github.com/sagebox/sagebox/internal/controlplane"
	"github.com/sagebox/sagebox/internal/gpu"
	"github.com/sagebox/sagebox/internal/invoke"
	"github.com/sagebox/sagebox/internal/logstore"
	"github.com/sagebox/sagebox/internal/metastore"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/router"
	"github.com/sagebox/sagebox/internal/s3api"
	"github.com/sagebox/sagebox/internal/sigv4"
	"github.com/sagebox/sagebox/internal/staging/localobj"
	"github.com/sagebox/sagebox/internal/sts"
	"github.com/sagebox/sagebox/internal/training"
	"github.com/sagebox/sagebox/internal/training/local"
)

// serverOptions are the flags of `sagebox server`.
type serverOptions struct {
	addr        string
	dataDir     string
	region      string
	accountID   string
	credentials []string
	credsFile   string
	tlsCert     string
	tlsKey      string
	bodyIdle    time.Duration
	stopGrace   time.Duration
	logLevel    string
	logFormat   string

	allowLocalPaths []string
	keepWorkspaces  time.Duration
	keepFailed      time.Duration
	runAs           string
	hosting         hostingOptions
	runAsUIDs       string
	capacity        capacityOptions
}

func newServerCmd(e *env) *cobra.Command {
	var o serverOptions
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the SageMaker, CloudWatch Logs and S3 APIs on one address",
		Long: `Runs the sagebox control plane. Every client (boto3, the AWS CLI, the AWS SDK for
Go, the SageMaker Python SDK, the sagebox CLI) uses this one address as its
endpoint URL. Ready when GET /_sagebox/health answers 200.

On a loopback address any access key is accepted. Binding to any other address
requires credentials (--credentials-file, SAGEBOX_CREDENTIALS or --credentials),
and then every request must be signed with SigV4 by one of those keys, scoped
to --region and the service addressed. --tls-cert and --tls-key serve HTTPS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServer(cmd.Context(), e, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:7070", "listen address HOST:PORT")
	f.StringVar(&o.dataDir, "data-dir", "", "data directory (default $SAGEBOX_DATA_DIR, else $XDG_DATA_HOME/sagebox)")
	f.StringVar(&o.region, "region", "us-east-1", "AWS region the server claims to be")
	f.StringVar(&o.accountID, "account-id", "123456789012", "AWS account ID used in ARNs")
	f.StringArrayVar(&o.credentials, "credentials", nil, "ACCESS_KEY:SECRET accepted for SigV4 (repeatable; also SAGEBOX_CREDENTIALS, comma-separated); every local user sees a command line, prefer --credentials-file")
	f.StringVar(&o.credsFile, "credentials-file", "", "file of ACCESS_KEY:SECRET lines (# comments), mode 600 (default $SAGEBOX_CREDENTIALS_FILE)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with; needs --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.DurationVar(&o.bodyIdle, "body-idle-timeout", 60*time.Second, "drop a request whose body sends nothing for this long (0: never)")
	f.DurationVar(&o.stopGrace, "stop-grace", 30*time.Second, "time between SIGTERM and SIGKILL when a job is stopped")
	f.StringArrayVar(&o.allowLocalPaths, "allow-local-paths", nil, "directory of this machine that jobs may name with file:// (repeatable); by default a loopback server allows any path and any other allows none")
	f.DurationVar(&o.keepWorkspaces, "keep-workspaces", 0, "how long a finished job's workspace stays on disk after its artifacts are uploaded (0: removed at once)")
	f.DurationVar(&o.keepFailed, "keep-failed-workspaces", 0, "the same for failed and stopped jobs, for debugging")
	f.StringVar(&o.runAs, "run-as", "", "run training jobs as this user (name or uid), so they cannot read the data directory; the server must run as root")
	f.StringVar(&o.runAsUIDs, "run-as-uids", "", "run each training job as its own uid from FIRST-LAST (need not exist in /etc/passwd), so jobs cannot read each other's workspaces either; the range's last uid runs endpoint instances and no job; the server must run as root")
	o.capacity.flags(f)
	o.hosting.flags(f)
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	return cmd
}

// defaultDataDir is $SAGEBOX_DATA_DIR, else the XDG data directory.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("SAGEBOX_DATA_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "sagebox")
	}
	return filepath.Join(getenv("HOME"), ".local", "share", "sagebox")
}

func newLogger(e *env, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(e.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(e.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// isLoopback reports whether a listen address only accepts local connections.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServer(ctx context.Context, e *env, o *serverOptions) error {
	logger, err := newLogger(e, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	credsFile := o.credsFile
	if credsFile == "" {
		credsFile = e.getenv("SAGEBOX_CREDENTIALS_FILE")
	}
	var fileLines []string
	if credsFile != "" {
		if fileLines, err = readCredentialsFile(credsFile); err != nil {
			return err
		}
	}
	creds, err := parseCredentials(o.credentials, e.getenv("SAGEBOX_CREDENTIALS"), fileLines)
	if err != nil {
		return err
	}
	if !isLoopback(o.addr) && len(creds) == 0 {
		return fmt.Errorf("refusing to listen on %s without credentials: anyone who can reach it could run code on this machine; pass --credentials-file FILE (ACCESS_KEY:SECRET lines) or bind to 127.0.0.1", o.addr)
	}
	if len(o.credentials) > 0 {
		logger.Warn("--credentials puts secrets on the command line, where every local user can read them (ps); use --credentials-file or SAGEBOX_CREDENTIALS")
	}
	var tlsCert *tls.Certificate
	if o.tlsCert != "" || o.tlsKey != "" {
		if o.tlsCert == "" || o.tlsKey == "" {
			return fmt.Errorf("--tls-cert and --tls-key go together")
		}
		c, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsCert = &c
	}
	runAs, err := parseRunAs(o.runAs, o.runAsUIDs, os.Geteuid())
	if err != nil {
		return err
	}
	dataDir := o.dataDir
	if dataDir == "" {
		dataDir = defaultDataDir(e.getenv)
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}

	py, err := pyruntime.Find(ctx, e.getenv)
	if err != nil {
		logger.Warn("no usable Python found; training jobs will fail until one is installed", "error", err)
	} else {
		logger.Info("python interpreter chosen", "python", py.Path, "source", py.Source)
	}
	runtimeDir, err := pyruntime.Unpack(filepath.Join(dataDir, "runtime"))
	if err != nil {
		return fmt.Errorf("unpack python runtime: %w", err)
	}

	objects, err := objectstore.Open(filepath.Join(dataDir, "s3"))
	if err != nil {
		return fmt.Errorf("open object store: %w", err)
	}
	defer objects.Close()
	db, err := metastore.Open(ctx, filepath.Join(dataDir, "meta.db"))
	if err != nil {
		return fmt.Errorf("open metadata store: %w", err)
	}
	defer db.Close()
	logs, err := logstore.Open(ctx, filepath.Join(dataDir, "logs"))
	if err != nil {
		return fmt.Errorf("open log store: %w", err)
	}
	defer logs.Close()

	if runAs != nil {
		// After every store has created its files: close them to the jobs.
		if err := local.RestrictDataDir(dataDir); err != nil {
			return err
		}
		logger.Info("training jobs run as another user", "uid", runAs.UID, "gid", runAs.GID, "uids", runAs.Count)
	}
	// With a uid range, its last uid is the endpoint instances' and no
	// job's, so that no training script shares a uid with a served model.
	jobsRunAs := runAs
	if runAs != nil && runAs.Count > 1 {
		c := *runAs
		c.Count--
		jobsRunAs = &c
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	endpoint := "http://" + ln.Addr().String()
	if tlsCert != nil {
		endpoint = "https://" + ln.Addr().String()
	}

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the job shim: %w", err)
	}
	// One view of the GPUs for everything this server runs; jobs inherit
	// the server's environment, so its CUDA_VISIBLE_DEVICES narrows it.
	devs, err := gpu.Discover(ctx, gpu.NvidiaSMI, os.LookupEnv)
	if err != nil {
		logger.Debug("no GPUs", "error", err)
	} else {
		logger.Info("GPUs", "count", len(devs))
	}
	// With auth on, each job signs with its own key (jobkeys.go).
	var jobCreds func(string) (string, string)
	var keys *jobKeys
	if len(creds) > 0 {
		if keys, err = loadJobKeys(dataDir); err != nil {
			return err
		}
		jobCreds = keys.credentials
	}
	// One allocator: training hosts and endpoint instances share the GPUs.
	gpus := gpu.NewAllocator(devs, logger)
	pool, hostRes, err := o.capacity.pool(len(devs))
	if err != nil {
		return err
	}
	logger.Info("capacity", "total", pool.Total().String(), "per_host", hostRes.String())
	drv := local.New(local.Config{
		DataDir:              dataDir,
		Objects:              localobj.New(objects),
		Python:               py,
		RuntimeDir:           runtimeDir,
		SagemakerEndpoint:    endpoint,
		JobCredentials:       jobCreds,
		ShimCommand:          []string{self, "exec-shim"},
		GPUs:                 gpus,
		LocalPaths:           localPathPolicy(o.addr, o.allowLocalPaths),
		KeepWorkspaces:       o.keepWorkspaces,
		KeepFailedWorkspaces: o.keepFailed,
		RunAs:                jobsRunAs,
		Logger:               logger,
	})
	drv.Sweep()
	runner := training.NewRunner(training.Config{
		DataDir:       dataDir,
		Driver:        drv,
		Capacity:      pool,
		HostResources: hostRes,
		Region:        o.region,
		StopGrace:     o.stopGrace,
	}, db, logs, logger)

	// Endpoints: instances publish to the route table InvokeEndpoint
	// serves from, and take the same capacity and GPUs as training hosts.
	routes := invoke.NewTable()
	endpoints, err := o.hosting.newHosting(hostingParts{
		dataDir: dataDir, self: self, endpoint: endpoint, region: o.region, db: db,
		objects: localobj.New(objects), logs: logs, routes: routes, pool: pool, instance: hostRes,
		gpus: gpus, runAs: runAs, keys: keys, stopGrace: o.stopGrace, logger: logger,
	})
	if err != nil {
		return err
	}
	cp := controlplane.New(controlplane.Config{Region: o.region, AccountID: o.accountID, MaxInstanceCount: maxHosts(pool, hostRes)}, db, logs, runner, endpoints, logger)
	s3cfg := s3api.Config{Region: o.region, VirtualHostDomains: []string{"localhost"}, Logger: logger, AccountID: o.accountID}
	var auth router.Authenticator
	if len(creds) > 0 {
		v := sigv4.NewVerifier(creds, time.Now, sigv4.WithRegion(o.region), sigv4.WithKeySource(keys.lookup))
		auth = sigv4Authenticator{v}
		// S3 verifies again itself so it can check aws-chunked chunk signatures.
		s3cfg.Verifier = v
	}
	s3h := s3api.New(objects, s3cfg)
	query := sts.New(sts.Config{AccountID: o.accountID, Logger: logger})
	health := &serverHealth{dataDir: dataDir}
	metrics := newServerMetrics()
	// InvokeEndpoint over the route table hosting publishes.
	runtimeH, err := invoke.NewHandler(routes, invoke.Config{
		Region: o.region, AccountID: o.accountID, Registerer: metrics.reg, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer runtimeH.Close()
	handler := metrics.Instrument(router.New(router.Routes{
		JSON: cp, Runtime: runtimeH, S3: s3h, Query: query, Health: health.Check, Metrics: metrics.Handler(),
	}, auth, logger))

	srv := &http.Server{
		Handler:           bodytimeout.Handler(handler, o.bodyIdle),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if tlsCert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*tlsCert}, MinVersion: tls.VersionTLS12}
		// HTTP/1.1 only, as S3 itself: one code path for bodies and
		// deadlines whatever the transport.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	if err := runner.Recover(ctx); err != nil {
		logger.Error("recover training jobs", "error", err)
	}
	// Before serving: every endpoint's current instances are re-adopted
	// (stale ones stopped) before a request can reach them.
	if err := endpoints.Recover(ctx); err != nil {
		logger.Error("recover endpoints", "error", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("sagebox server ready", "addr", ln.Addr().String(), "endpoint", endpoint, "data_dir", dataDir, "auth", len(creds) > 0, "tls", tlsCert != nil)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	health.stopping.Store(true)
	logger.Info("shutting down; running jobs and endpoint instances keep running and are re-adopted at the next start")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("shutdown", "error", err)
	}
	endpoints.Close()
	return runner.Close(shutdownCtx)
}
