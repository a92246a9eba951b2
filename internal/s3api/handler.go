package s3api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// Config configures a Handler. The zero value works.
type Config struct {
	// Region is reported as the buckets' region when the request does not
	// say which region it was signed for. Default "us-east-1".
	Region string
	// VirtualHostDomains are base domains for virtual-host-style
	// addressing: with "localhost", a request for
	// "mybucket.localhost:7070" addresses bucket "mybucket".
	VirtualHostDomains []string
	// Logger receives one debug line per request and internal errors.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Verifier, if set, verifies every request that does not already carry
	// a sigv4.Result in its context (put there by sigv4's middleware). Either
	// way, a verified request's signed aws-chunked body has its chunk
	// signatures checked.
	Verifier *sigv4.Verifier
	// OwnerID and OwnerName are the owner shown in listings.
	OwnerID   string
	OwnerName string
	// AccountID, if set, is compared with x-amz-expected-bucket-owner;
	// a mismatch is 403 AccessDenied. Empty accepts any value.
	AccountID string
}

// Handler is the S3 API as an http.Handler. It is safe for concurrent use.
type Handler struct {
	store *objectstore.Store
	cfg   Config
	log   *slog.Logger
	// keepAliveAfter is how long CompleteMultipartUpload may run before
	// the response is committed to 200 and whitespace keeps the
	// connection alive, as S3 does.
	keepAliveAfter time.Duration
	// beforeComplete, when set (tests only), runs before a
	// CompleteMultipartUpload starts assembling.
	beforeComplete func()
}

// New returns the S3 API over store.
func New(store *objectstore.Store, cfg Config) *Handler {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OwnerID == "" {
		cfg.OwnerID = "75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a"
	}
	if cfg.OwnerName == "" {
		cfg.OwnerName = "sagebox"
	}
	domains := make([]string, 0, len(cfg.VirtualHostDomains))
	for _, d := range cfg.VirtualHostDomains {
		if d = strings.ToLower(strings.Trim(d, ".")); d != "" {
			domains = append(domains, d)
		}
	}
	cfg.VirtualHostDomains = domains
	return &Handler{store: store, cfg: cfg, log: cfg.Logger, keepAliveAfter: 5 * time.Second}
}

// request is one S3 call being served.
type request struct {
	w      *statusWriter
	r      *http.Request
	ctx    context.Context
	id     string
	bucket string
	key    string
	query  url.Values
	auth   *sigv4.Result // nil when the request was not verified
}

// ServeHTTP serves one S3 request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rq := &request{w: sw, r: r, ctx: r.Context(), id: setRequestID(w), query: r.URL.Query()}
	rq.bucket, rq.key = h.route(r)

	if res, ok := sigv4.FromContext(rq.ctx); ok {
		rq.auth = res
	} else if h.cfg.Verifier != nil {
		res, err := h.cfg.Verifier.Verify(r)
		if err != nil {
			h.fail(rq, err)
			h.logRequest(rq, start)
			return
		}
		rq.auth = res
		rq.ctx = sigv4.NewContext(rq.ctx, res)
	}
	if err := h.dispatch(rq); err != nil {
		h.fail(rq, err)
	}
	h.logRequest(rq, start)
}

func (h *Handler) logRequest(rq *request, start time.Time) {
	h.log.Debug("s3 request", "method", rq.r.Method, "bucket", rq.bucket, "key", rq.key,
		"query", rq.r.URL.RawQuery, "status", rq.w.status, "bytes", rq.w.written,
		"duration", time.Since(start), "request_id", rq.id)
}

// fail writes err as an S3 error unless a response has already started.
func (h *Handler) fail(rq *request, err error) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		h.log.Error("s3 request failed", "method", rq.r.Method, "bucket", rq.bucket, "key", rq.key,
			"request_id", rq.id, "err", err)
	}
	if rq.w.status != 0 {
		// Too late for an error response (a GET body was under way);
		// the client sees a short body.
		return
	}
	writeErrorBody(rq.w, rq.r, ae, rq.bucket, rq.key, rq.id)
}

// route finds the bucket and key of a request, virtual-host style when the
// Host is <bucket>.<one of VirtualHostDomains>, path-style otherwise.
func (h *Handler) route(r *http.Request) (bucket, key string) {
	host := strings.ToLower(r.Host)
	if hst, _, err := net.SplitHostPort(host); err == nil {
		host = hst
	}
	for _, d := range h.cfg.VirtualHostDomains {
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b, strings.TrimPrefix(r.URL.Path, "/")
		}
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, key
}

// region is what this request is told its bucket's region is: the region
// it was signed for, else the configured one.
func (h *Handler) region(r *http.Request) string {
	if c, ok := sigv4.ParseCredential(r); ok && c.Region != "" {
		return c.Region
	}
	return h.cfg.Region
}

func setRequestID(w http.ResponseWriter) string {
	var b [8]byte
	rand.Read(b[:])
	id := strings.ToUpper(hex.EncodeToString(b[:]))
	var h [24]byte
	rand.Read(h[:])
	w.Header().Set("x-amz-request-id", id)
	w.Header().Set("x-amz-id-2", base64.StdEncoding.EncodeToString(h[:]))
	return id
}

// statusWriter records the status and size of a response. It passes
// ReadFrom through (so net/http can sendfile object files) and supports
// http.ResponseController via Unwrap.
type statusWriter struct {
	http.ResponseWriter
	status  int
	written int64
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.written += int64(n)
	return n, err
}

func (s *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(struct{ io.Writer }{s.ResponseWriter}, src)
	}
	s.written += n
	return n, err
}

func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// checkExpectedOwner enforces x-amz-expected-bucket-owner when an account
// is configured.
func (h *Handler) checkExpectedOwner(rq *request) error {
	want := rq.r.Header.Get("x-amz-expected-bucket-owner")
	if want != "" && h.cfg.AccountID != "" && want != h.cfg.AccountID {
		return errAccessDenied
	}
	return nil
}
