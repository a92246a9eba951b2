package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sagebox/sagebox/internal/router"
)

// serverMetrics are the `sagebox server` metrics served on
// /_sagebox/metrics: Go runtime and process collectors, and requests by
// the service the router sent them to.
type serverMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
}

func newServerMetrics() *serverMetrics {
	reg := prometheus.NewRegistry()
	m := &serverMetrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "server", Name: "requests_total",
			Help: "Requests answered, by the service they addressed (s3, json, query, runtime, sagebox), method and HTTP status code.",
		}, []string{"service", "method", "code"}),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.requests)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *serverMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Instrument counts the requests next answers by service. promhttp's
// delegator keeps the optional interfaces of the ResponseWriter (Flusher,
// Hijacker, ReaderFrom) that S3 streaming relies on. InvokeEndpoint, which
// needs none of them and is the one route served at high rates, takes a
// lighter path: a status-recording writer and its counters resolved once
// per status code, under the same labels promhttp gives.
func (m *serverMetrics) Instrument(next http.Handler) http.Handler {
	var byService [router.ServiceQuery + 1]http.Handler
	for svc := range byService {
		labels := prometheus.Labels{"service": router.Service(svc).String()}
		byService[svc] = promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), next)
	}
	runtime := newCodeCounters(m.requests.MustCurryWith(prometheus.Labels{"service": router.ServiceRuntime.String(), "method": "post"}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc := router.Classify(r)
		if svc == router.ServiceRuntime && r.Method == http.MethodPost {
			cw := &codeWriter{ResponseWriter: w}
			next.ServeHTTP(cw, r)
			runtime.get(cw.code).Inc()
			return
		}
		if int(svc) >= len(byService) {
			next.ServeHTTP(w, r)
			return
		}
		byService[svc].ServeHTTP(w, r)
	})
}

// codeCounters are a counter vector's series by HTTP status code (the only
// label left), each looked up once.
type codeCounters struct {
	vec    *prometheus.CounterVec
	byCode [600]atomic.Pointer[prometheus.Counter]
}

func newCodeCounters(vec *prometheus.CounterVec) *codeCounters { return &codeCounters{vec: vec} }

// get returns the series of status code, labelled as promhttp labels it:
// 0 (nothing written) as 200, codes outside 100-599 as "unknown".
func (c *codeCounters) get(code int) prometheus.Counter {
	if code == 0 {
		code = http.StatusOK
	}
	if code < 100 || code > 599 {
		return c.vec.WithLabelValues("unknown")
	}
	if p := c.byCode[code].Load(); p != nil {
		return *p
	}
	ctr := c.vec.WithLabelValues(strconv.Itoa(code))
	c.byCode[code].Store(&ctr)
	return ctr
}

// codeWriter records the status code written through it.
type codeWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader keeps the last code, as promhttp's delegator does.
func (w *codeWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serverHealth is /_sagebox/health for `sagebox server`: healthy while the
// data directory is there and the server is not shutting down.
type serverHealth struct {
	dataDir  string
	stopping atomic.Bool
}

func (h *serverHealth) Check() error {
	if h.stopping.Load() {
		return errors.New("shutting down")
	}
	if st, err := os.Stat(h.dataDir); err != nil {
		return fmt.Errorf("data directory: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", h.dataDir)
	}
	return nil
}
