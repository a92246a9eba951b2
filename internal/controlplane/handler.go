package controlplane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
	"github.com/sagebox/sagebox/internal/metastore"
)

// Target prefixes of the two services this package serves.
const (
	sageMakerPrefix = "SageMaker."
	logsPrefix      = "Logs_20140328."
)

// Runner runs training jobs. CreateTrainingJob calls Submit after storing a
// job (InProgress/Starting); StopTrainingJob calls Stop after marking it
// Stopping. Both are called with a context that outlives the HTTP request,
// and both should return promptly: the work itself happens in the
// background, reporting progress through the metastore.
type Runner interface {
	Submit(ctx context.Context, jobName string) error
	Stop(ctx context.Context, jobName string) error
}

// Config holds the handler's settings. Zero values take the defaults.
type Config struct {
	// Region goes into ARNs; default "us-east-1".
	Region string
	// AccountID goes into ARNs; default "123456789012".
	AccountID string
	// Now is the clock for job timestamps; default time.Now.
	Now func() time.Time
	// MaxInstanceCount caps ResourceConfig.InstanceCount; default 16.
	MaxInstanceCount int
	// MaxBodyBytes caps request bodies; default 1 MiB. Larger requests get
	// 413 RequestEntityTooLargeException.
	MaxBodyBytes int64
}

// Default values of Config.
const (
	DefaultRegion           = "us-east-1"
	DefaultAccountID        = "123456789012"
	DefaultMaxInstanceCount = 16
	DefaultMaxBodyBytes     = 1 << 20
)

// Handler serves the SageMaker and CloudWatch Logs JSON APIs.
type Handler struct {
	cfg     Config
	jobs    *metastore.DB
	tags    TagStore
	logs    *logstore.Store
	runner  Runner
	hosting Hosting
	logger  *slog.Logger
	ops     map[string]opFunc
}

// New returns a Handler backed by jobs (which also keeps models, endpoint
// configs, endpoints and the tags of every taggable resource) and logs
// that hands training jobs to runner and endpoints to hosting. A nil
// hosting serves models and endpoint configs but answers the operations
// that change endpoints with ServiceUnavailable. A nil logger means
// slog.Default().
func New(cfg Config, jobs *metastore.DB, logs *logstore.Store, runner Runner, hosting Hosting, logger *slog.Logger) *Handler {
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxInstanceCount <= 0 {
		cfg.MaxInstanceCount = DefaultMaxInstanceCount
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if logger == nil {
		logger = slog.Default()
	}
	h := &Handler{
		cfg:     cfg,
		jobs:    jobs,
		tags:    jobs,
		logs:    logs,
		runner:  runner,
		hosting: hosting,
		logger:  logger.With(slog.String("system", "controlplane")),
	}
	h.ops = h.routes()
	return h
}

// IsJSONTarget reports whether r is an AWS JSON request for this handler: a
// POST whose X-Amz-Target names a SageMaker or CloudWatch Logs operation.
// The top-level router sends exactly these requests to ServeHTTP.
func IsJSONTarget(r *http.Request) bool {
	target := r.Header.Get("X-Amz-Target")
	return r.Method == http.MethodPost &&
		(strings.HasPrefix(target, sageMakerPrefix) || strings.HasPrefix(target, logsPrefix))
}

// ServeHTTP serves one AWS JSON 1.1 request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	requestID := uuid.NewString()
	w.Header().Set("X-Amzn-RequestId", requestID)
	target := r.Header.Get("X-Amz-Target")

	out, err := h.serve(r, target)
	if err == nil {
		err = writeJSON(w, http.StatusOK, out)
	}
	if err != nil {
		h.writeError(w, requestID, target, err)
	}
	h.logger.Debug("request", slog.String("request_id", requestID), slog.String("op", target),
		slog.String("code", errorCode(err)), slog.Duration("took", time.Since(start)))
}

func (h *Handler) serve(r *http.Request, target string) (any, error) {
	if r.Method != http.MethodPost {
		return nil, sagebox.Errorf(codeMethodNotAllowed, "The AWS JSON APIs accept only POST, not %s.", r.Method)
	}
	fn, ok := h.ops[target]
	if !ok {
		return nil, sagebox.Errorf(sagebox.ErrUnknownOperation, "Operation %q is not supported by sagebox.", target)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, sagebox.Errorf(codeRequestTooLarge, "The request body exceeds the limit of %d bytes.", tooLarge.Limit)
		}
		return nil, sagebox.Errorf(sagebox.ErrSerialization, "The request body could not be read: %s.", err.Error())
	}
	return fn(r.Context(), body)
}

// errorCode is the code err will be reported with, "" for success.
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	return sagebox.ErrorCode(err)
}
