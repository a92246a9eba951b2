package modelserver

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers can live in one process.
type metrics struct {
	reg *prometheus.Registry
	// gatherer is what the handler serves: reg, or for a multi-container
	// model reg merged with its containers' (Group).
	gatherer prometheus.Gatherer

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
		reg:      reg,
		gatherer: reg,
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
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{Registry: m.reg})
}

// perContainer are the metrics a multi-container model reports per
// container (labelled container="<hostname>"); the model's own registry
// keeps the rest: invocations, latency, and queue depth and loaded workers
// summed over the containers.
var perContainer = map[string]bool{
	"sagebox_model_queue_seconds":         true,
	"sagebox_model_worker_seconds":        true,
	"sagebox_model_handler_seconds":       true,
	"sagebox_model_batch_size":            true,
	"sagebox_model_worker_restarts_total": true,
}

// filteredGatherer gathers the families of g that keep names, with the
// label container=host added when host is set.
type filteredGatherer struct {
	g    prometheus.Gatherer
	keep func(name string) bool
	host string
}

func (f filteredGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := f.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if !f.keep(mf.GetName()) {
			continue
		}
		if f.host != "" {
			for _, m := range mf.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("container"), Value: proto.String(f.host)})
				slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			}
		}
		out = append(out, mf)
	}
	return out, err
}

// groupGatherer merges a multi-container model's registry with its
// containers' per-container metrics.
func groupGatherer(own *prometheus.Registry, hosts []string, regs []*prometheus.Registry) prometheus.Gatherer {
	gs := prometheus.Gatherers{filteredGatherer{g: own, keep: func(n string) bool { return !perContainer[n] }}}
	for i, r := range regs {
		gs = append(gs, filteredGatherer{g: r, keep: func(n string) bool { return perContainer[n] }, host: hosts[i]})
	}
	return gs
}
