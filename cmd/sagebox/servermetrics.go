package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
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
// Hijacker, ReaderFrom) that S3 streaming relies on.
func (m *serverMetrics) Instrument(next http.Handler) http.Handler {
	var byService [router.ServiceQuery + 1]http.Handler
	for svc := range byService {
		labels := prometheus.Labels{"service": router.Service(svc).String()}
		byService[svc] = promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc := router.Classify(r)
		if int(svc) >= len(byService) {
			next.ServeHTTP(w, r)
			return
		}
		byService[svc].ServeHTTP(w, r)
	})
}

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
