package modelserver

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers can live in one process.
type metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec
	codeCounters sync.Map // int → prometheus.Counter
	requestTime  prometheus.Histogram
	queueTime    prometheus.Histogram
	workerTime   prometheus.Histogram
	handlerTime  prometheus.Histogram
	batchSize    prometheus.Histogram
	restarts     prometheus.Counter
}

func newMetrics(queueDepth, workersLoaded func() float64, maxBatch int) *metrics {
	reg := prometheus.NewRegistry()
	// Latency buckets run from 100µs to about 100s.
	latencyBuckets := prometheus.ExponentialBuckets(0.0001, 2.5, 16)
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sagebox", Subsystem: "model", Name: name, Help: help, Buckets: latencyBuckets,
		})
	}
	var batchBuckets []float64
	for b := 1; b < maxBatch; b *= 2 {
		batchBuckets = append(batchBuckets, float64(b))
	}
	batchBuckets = append(batchBuckets, float64(maxBatch))
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "model", Name: "requests_total",
			Help: "Invocations answered, by HTTP status code.",
		}, []string{"code"}),
		requestTime: hist("request_seconds", "Time from a complete request body to the response, per invocation."),
		queueTime:   hist("queue_seconds", "Time an invocation waited in the queue before a worker took it."),
		workerTime:  hist("worker_seconds", "Round trip of one batch through a worker (socket, decoding, handlers)."),
		handlerTime: hist("handler_seconds", "Time one batch spent in handler code, as the worker measured it."),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sagebox", Subsystem: "model", Name: "batch_size",
			Help: "Invocations per batch sent to a worker.", Buckets: batchBuckets,
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "model", Name: "worker_restarts_total",
			Help: "Worker processes restarted after a crash, a timeout or a failed load.",
		}),
	}
	reg.MustRegister(m.requests, m.requestTime, m.queueTime, m.workerTime, m.handlerTime, m.batchSize, m.restarts,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sagebox", Subsystem: "model", Name: "queue_depth",
			Help: "Invocations waiting for a worker.",
		}, queueDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sagebox", Subsystem: "model", Name: "workers_loaded",
			Help: "Worker processes with the model loaded.",
		}, workersLoaded),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observeRequest counts one answered invocation.
func (m *metrics) observeRequest(code int, d time.Duration) {
	c, ok := m.codeCounters.Load(code)
	if !ok {
		c, _ = m.codeCounters.LoadOrStore(code, m.requests.WithLabelValues(strconv.Itoa(code)))
	}
	c.(prometheus.Counter).Inc()
	m.requestTime.Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
