package modelserver

import (
	"context"
	"fmt"
	"github.com/sagebox/sagebox/internal/archive"
	"strconv"
	"strings"
	"time"
)

// Defaults, as the SageMaker PyTorch inference toolkit and TorchServe set
// them.
const (
	DefaultPort           = 8080
	DefaultProgram        = "inference.py"
	DefaultRequestTimeout = 60 * time.Second
	DefaultStartupTimeout = 600 * time.Second
	DefaultBatchSize      = 1
	DefaultMaxBatchDelay  = 100 * time.Millisecond
	DefaultAccept         = "application/json"
	// DefaultModelDataMaxBytes and DefaultModelDataMaxEntries bound what
	// a model.tar.gz may unpack to (Config.ModelDataLimits).
	DefaultModelDataMaxBytes   = 32 << 30
	DefaultModelDataMaxEntries = 1_000_000
	DefaultMaxPayload          = 6 << 20 // 6291456 bytes, InvokeEndpoint's limit
	DefaultQueueSize           = 100
	DefaultShutdownGrace       = 30 * time.Second

	// MaxBatchSize bounds SAGEMAKER_TS_BATCH_SIZE: a batch's answers travel
	// in one frame of at most 4 GiB, so each of 1024 may still be ~4 MiB.
	MaxBatchSize = 1024
)

// Config is everything a Server needs. ConfigFromEnv fills the parts that
// come from SageMaker's environment variables; the caller sets the model
// source and listener addresses.
type Config struct {
	// ModelDir is the model directory (/opt/ml/model in SageMaker). Either
	// it or ModelData is required.
	ModelDir string
	// ModelData is a model.tar.gz, extracted at Start into a temporary
	// directory under CacheDir that Shutdown removes.
	ModelData string

	// Program is SAGEMAKER_PROGRAM, the user module in the code directory.
	Program string
	// CodeDir is the user code's directory; empty means <model>/code.
	// ConfigFromEnv sets it from SAGEMAKER_SUBMIT_DIRECTORY when that names
	// a local directory (see codeDirFromSubmit).
	CodeDir string
	// OriginalRequest makes the workers receive each request's original
	// (Request.Original, else the request itself) next to the request:
	// a serial pipeline's stages after the first (context.original_request).
	OriginalRequest bool
	// Container is the container's hostname in a multi-container model,
	// for logs; empty for a single model.
	Container string
	// Workers is the number of worker processes; 0 means one per visible
	// GPU, or one per CPU when there is none.
	Workers int
	// StartupTimeout bounds a worker's start: connect, HELLO and model_fn.
	StartupTimeout time.Duration
	// RequestTimeout bounds one batch's round trip through a worker, and
	// the time a request may wait in the queue for a worker.
	RequestTimeout time.Duration
	// BatchSize is the largest batch handed to a worker.
	BatchSize int
	// MaxBatchDelay is how long a worker waits for a batch to fill.
	MaxBatchDelay time.Duration
	// DefaultAccept is used when a request has no Accept or "*/*".
	DefaultAccept string
	// MaxPayload is the largest request body in bytes.
	MaxPayload int64
	// QueueSize is the most requests waiting for a worker.
	QueueSize int
	// IncludeTraceback puts Python tracebacks in error responses. They are
	// always logged.
	IncludeTraceback bool

	// Python is the interpreter for workers; empty means pyruntime.Find.
	Python string
	// RuntimeDir is the directory holding the sagebox_runtime package;
	// empty means the embedded copy unpacked under CacheDir.
	RuntimeDir string
	// CacheDir holds the unpacked runtime, requirement environments and
	// extracted models; empty means the user cache dir + "/sagebox".
	CacheDir string
	// Env is the workers' base environment (KEY=VALUE); nil means the
	// server's own environment.
	Env []string
	// GPUs is the number of GPUs to spread workers over; -1 means detect
	// with nvidia-smi, honouring CUDA_VISIBLE_DEVICES.
	GPUs int

	// Supervisor is the argv that runs internal/proc's supervisor
	// ({os.Executable(), "exec-shim"} in sagebox). Each worker runs under
	// one, so that it and whatever it forks (setsid() daemons included) die
	// with the model server, even when it is SIGKILLed. Empty runs workers
	// directly: they die with the server, their forks may not.
	Supervisor []string

	// ShutdownGrace bounds how long a worker may take to exit once asked.
	ShutdownGrace time.Duration
	// RestartBackoff is the delay before the second consecutive restart
	// of a failing worker; it doubles up to RestartBackoffMax. The first
	// restart after a worker has loaded is immediate.
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// ServerVersion is reported to handlers in
	// context.system_properties["server_version"].
	ServerVersion string

	// WorkerMaxRSS, when positive, recycles a worker whose peak resident
	// set size passed this many bytes, after it answered the request that
	// took it there (SAGEBOX_WORKER_MAX_RSS_MB). 0: no limit.
	WorkerMaxRSS int64
	// ModelDataLimits bound what ModelData may unpack to
	// (SAGEBOX_MODEL_DATA_MAX_MB, SAGEBOX_MODEL_DATA_MAX_ENTRIES).
	ModelDataLimits archive.Limits

	// pipelineQuick overrides the constant of that name (tests that need
	// slow requests taken together); zero keeps it.
	pipelineQuick time.Duration
	// restartWait waits out a worker's restart backoff, reporting false
	// when ctx ended first; nil means a timer (sleepCtx). Tests record the
	// delays instead of sleeping them.
	restartWait func(ctx context.Context, d time.Duration) bool
}

// DefaultConfig returns a Config with every default applied.
func DefaultConfig() Config {
	return Config{
		Program:           DefaultProgram,
		StartupTimeout:    DefaultStartupTimeout,
		RequestTimeout:    DefaultRequestTimeout,
		BatchSize:         DefaultBatchSize,
		MaxBatchDelay:     DefaultMaxBatchDelay,
		DefaultAccept:     DefaultAccept,
		MaxPayload:        DefaultMaxPayload,
		QueueSize:         DefaultQueueSize,
		GPUs:              -1,
		ShutdownGrace:     10 * time.Second,
		RestartBackoff:    time.Second,
		RestartBackoffMax: time.Minute,
		ServerVersion:     "dev",
		ModelDataLimits:   archive.Limits{MaxBytes: DefaultModelDataMaxBytes, MaxEntries: DefaultModelDataMaxEntries},
	}
}

// ConfigFromEnv returns DefaultConfig overridden by the environment, as the
// SageMaker PyTorch serving containers read it. Each variable has its own
// effect: unlike the toolkit, setting one SAGEMAKER_TS_* variable does not
// pin the others (or the worker count) to defaults.
//
//	SAGEMAKER_PROGRAM                     user module (default inference.py)
//	SAGEMAKER_SUBMIT_DIRECTORY            code directory when a local path (else <model>/code)
//	SAGEMAKER_MODEL_SERVER_WORKERS        worker processes
//	SAGEMAKER_TS_RESPONSE_TIMEOUT,
//	SAGEMAKER_MODEL_SERVER_TIMEOUT,
//	SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS  request timeout in s, first set wins (60)
//	SAGEMAKER_STARTUP_TIMEOUT,
//	TS_DEFAULT_STARTUP_TIMEOUT            model load timeout in s (600)
//	SAGEMAKER_TS_BATCH_SIZE               batch size (1)
//	SAGEMAKER_TS_MAX_BATCH_DELAY          batch delay in ms (100)
//	SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT  Accept fallback (application/json)
//	TS_MAX_REQUEST_SIZE (bytes),
//	SAGEMAKER_MAX_PAYLOAD_IN_MB           payload limit, first set wins (6 MiB)
//	SAGEBOX_QUEUE_SIZE, TS_JOB_QUEUE_SIZE queue size, first set wins (100)
//	SAGEBOX_INCLUDE_TRACEBACK             tracebacks in error bodies (false)
//	SAGEBOX_WORKER_MAX_RSS_MB             recycle a worker past this peak RSS (off)
//	SAGEBOX_MODEL_DATA_MAX_MB             model.tar.gz unpacked size (32 GiB)
//	SAGEBOX_MODEL_DATA_MAX_ENTRIES        model.tar.gz entries (1000000)
//
// SAGEMAKER_BIND_TO_PORT is read by Port. Bad values are errors that name
// the variable. Process-wide tuning (GOMAXPROCS, SAGEBOX_SCHED_BATCH) is
// not the library's: `sagebox model-server` applies it to its own process.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	var errs []string
	bad := func(name, val, want string) {
		errs = append(errs, fmt.Sprintf("%s=%q: %s", name, val, want))
	}
	// first returns the first of names that is set, and its value.
	first := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	posInt := func(dst *int, names ...string) {
		name, v := first(names...)
		if name == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad(name, v, "must be a positive integer")
			return
		}
		*dst = n
	}
	duration := func(dst *time.Duration, unit time.Duration, unitName string, allowZero bool, names ...string) {
		name, v := first(names...)
		if name == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || (n == 0 && !allowZero) || n > int64(24*time.Hour/unit) {
			if allowZero {
				bad(name, v, "must be a whole number of "+unitName+", 0 or more")
			} else {
				bad(name, v, "must be a positive whole number of "+unitName)
			}
			return
		}
		*dst = time.Duration(n) * unit
	}

	if v := strings.TrimSpace(getenv("SAGEMAKER_PROGRAM")); v != "" {
		c.Program = v
	}
	c.CodeDir = codeDirFromSubmit(getenv("SAGEMAKER_SUBMIT_DIRECTORY"))
	posInt(&c.Workers, "SAGEMAKER_MODEL_SERVER_WORKERS")
	duration(&c.RequestTimeout, time.Second, "seconds", false,
		"SAGEMAKER_TS_RESPONSE_TIMEOUT", "SAGEMAKER_MODEL_SERVER_TIMEOUT", "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS")
	duration(&c.StartupTimeout, time.Second, "seconds", false, "SAGEMAKER_STARTUP_TIMEOUT", "TS_DEFAULT_STARTUP_TIMEOUT")
	posInt(&c.BatchSize, "SAGEMAKER_TS_BATCH_SIZE")
	if c.BatchSize > MaxBatchSize {
		bad("SAGEMAKER_TS_BATCH_SIZE", strconv.Itoa(c.BatchSize), fmt.Sprintf("must be no larger than %d", MaxBatchSize))
	}
	duration(&c.MaxBatchDelay, time.Millisecond, "milliseconds", true, "SAGEMAKER_TS_MAX_BATCH_DELAY")
	if v := strings.TrimSpace(getenv("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT")); v != "" {
		c.DefaultAccept = v
	}
	if name, v := first("TS_MAX_REQUEST_SIZE", "SAGEMAKER_MAX_PAYLOAD_IN_MB"); name != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		unit := int64(1)
		if name == "SAGEMAKER_MAX_PAYLOAD_IN_MB" {
			unit = 1 << 20
		}
		if err != nil || n < 1 || n > (1<<31)/unit {
			bad(name, v, "must be a positive integer no larger than 2 GiB")
		} else {
			c.MaxPayload = n * unit
		}
	}
	posInt(&c.QueueSize, "SAGEBOX_QUEUE_SIZE", "TS_JOB_QUEUE_SIZE")
	if v := strings.TrimSpace(getenv("SAGEBOX_INCLUDE_TRACEBACK")); v != "" {
		b, err := parseBool(v)
		if err != nil {
			bad("SAGEBOX_INCLUDE_TRACEBACK", v, "must be true or false")
		}
		c.IncludeTraceback = b
	}
	mib := func(dst *int64, name string) {
		if _, v := first(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1<<40 {
				bad(name, v, "must be a positive whole number of MiB")
				return
			}
			*dst = n << 20
		}
	}
	mib(&c.WorkerMaxRSS, "SAGEBOX_WORKER_MAX_RSS_MB")
	mib(&c.ModelDataLimits.MaxBytes, "SAGEBOX_MODEL_DATA_MAX_MB")
	posInt(&c.ModelDataLimits.MaxEntries, "SAGEBOX_MODEL_DATA_MAX_ENTRIES")
	if v := strings.TrimSpace(getenv("SAGEMAKER_MULTI_MODEL")); v != "" {
		if b, err := parseBool(v); err != nil || b {
			bad("SAGEMAKER_MULTI_MODEL", v, "multi-model endpoints are not supported by sagebox model-server")
		}
	}
	if _, err := Port(getenv); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("invalid model server configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// codeDirFromSubmit maps SAGEMAKER_SUBMIT_DIRECTORY to Config.CodeDir.
// Unset, SageMaker's /opt/ml/model/code (what the SDK sets for repacked
// models) and a URL such as s3://bucket/sourcedir.tar.gz (framework ≤ 1.1:
// whoever prepares the model directory extracts it into <model>/code, as
// sagebox's endpoint hosting does) all mean <model>/code, returned as "".
// Anything else is a local directory (file:// stripped), checked at Start.
func codeDirFromSubmit(v string) string {
	v = strings.TrimSpace(v)
	if p, ok := strings.CutPrefix(v, "file://"); ok {
		v = p
	}
	switch {
	case v == "", strings.Contains(v, "://"):
		return ""
	case strings.TrimRight(v, "/") == "/opt/ml/model/code":
		return ""
	}
	return v
}

// Port returns SAGEMAKER_BIND_TO_PORT, or DefaultPort when it is unset.
func Port(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv("SAGEMAKER_BIND_TO_PORT"))
	if v == "" {
		return DefaultPort, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("SAGEMAKER_BIND_TO_PORT=%q: must be a port number (1-65535)", v)
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}

// withDefaults fills zero fields that have a default, so a Config built
// by hand needs only the model source.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Program == "" {
		c.Program = d.Program
	}
	if c.ModelDataLimits.MaxBytes == 0 {
		c.ModelDataLimits.MaxBytes = d.ModelDataLimits.MaxBytes
	}
	if c.ModelDataLimits.MaxEntries == 0 {
		c.ModelDataLimits.MaxEntries = d.ModelDataLimits.MaxEntries
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = d.StartupTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.DefaultAccept == "" {
		c.DefaultAccept = d.DefaultAccept
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = d.MaxPayload
	}
	if c.QueueSize == 0 {
		c.QueueSize = d.QueueSize
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = d.ShutdownGrace
	}
	if c.RestartBackoff == 0 {
		c.RestartBackoff = d.RestartBackoff
	}
	if c.RestartBackoffMax == 0 {
		c.RestartBackoffMax = d.RestartBackoffMax
	}
	if c.ServerVersion == "" {
		c.ServerVersion = d.ServerVersion
	}
	return c
}

// validate checks a Config (with defaults applied) before New accepts it.
func (c *Config) validate() error {
	var errs []string
	switch {
	case c.ModelDir == "" && c.ModelData == "":
		errs = append(errs, "a model directory or a model.tar.gz is required")
	case c.ModelDir != "" && c.ModelData != "":
		errs = append(errs, "give either a model directory or a model.tar.gz, not both")
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Sprintf("workers must be 0 (automatic) or more, not %d", c.Workers))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Sprintf("batch size must be from 1 to %d, not %d", MaxBatchSize, c.BatchSize))
	}
	if c.QueueSize < 1 {
		errs = append(errs, fmt.Sprintf("queue size must be at least 1, not %d", c.QueueSize))
	}
	if c.MaxPayload < 1 {
		errs = append(errs, fmt.Sprintf("payload limit must be positive, not %d", c.MaxPayload))
	}
	if c.RequestTimeout <= 0 || c.StartupTimeout <= 0 {
		errs = append(errs, "request and startup timeouts must be positive")
	}
	if c.MaxBatchDelay < 0 {
		errs = append(errs, "max batch delay must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid model server configuration: %s", strings.Join(errs, "; "))
	}
	return nil
}
