package invoke

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the per endpoint and variant series, named after
// SageMaker's CloudWatch endpoint metrics (Invocations,
// Invocation4XXErrors, Invocation5XXErrors, InvocationModelErrors,
// ModelLatency, OverheadLatency) and counted as those are: the error
// counts are about what the model answered, not requests sagebox refused
// before an instance saw them (the router's request counter has those).
type metrics struct {
	invocations *prometheus.CounterVec
	errors4xx   *prometheus.CounterVec
	errors5xx   *prometheus.CounterVec
	modelErrors *prometheus.CounterVec
	model       *prometheus.HistogramVec
	overhead    *prometheus.HistogramVec

	byVariant sync.Map // endpoint + "\x00" + variant → *variantMetrics
}

// variantMetrics are one variant's series, resolved once.
type variantMetrics struct {
	invocations, errors4xx, errors5xx, modelErrors prometheus.Counter
	model, overhead                                prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"endpoint", "variant"}
	m := &metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "invocations_total",
			Help: "InvokeEndpoint requests sent to a variant's instances (SageMaker's Invocations).",
		}, labels),
		errors4xx: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "invocation_4xx_errors_total",
			Help: "Invocations the model answered with a 4xx status (Invocation4XXErrors).",
		}, labels),
		errors5xx: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "invocation_5xx_errors_total",
			Help: "Invocations the model answered with a 5xx status (Invocation5XXErrors).",
		}, labels),
		modelErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "invocation_model_errors_total",
			Help: "Invocations that did not get a 2xx from the model: 4xx, 5xx, a broken connection or a timeout (InvocationModelErrors); each was answered 424 ModelError.",
		}, labels),
		model: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "model_latency_seconds",
			Help:    "Round trip to the instance: from sending the request until its whole answer is read (ModelLatency).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18), // 0.5 ms .. 65 s
		}, labels),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sagebox", Subsystem: "endpoint", Name: "overhead_latency_seconds",
			Help:    "Time sagebox added to an invocation: the whole request minus the model's round trip (OverheadLatency).",
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 18), // 20 µs .. 2.6 s
		}, labels),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.invocations, m.errors4xx, m.errors5xx, m.modelErrors, m.model, m.overhead} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// of returns the series of endpoint's variant v, cached on v.
func (m *metrics) of(endpoint string, v *variant) *variantMetrics {
	if vm := v.series.Load(); vm != nil {
		return vm
	}
	vm := m.variant(endpoint, v.name)
	v.series.Store(vm)
	return vm
}

// variant returns the series of endpoint's variant.
func (m *metrics) variant(endpoint, variant string) *variantMetrics {
	key := endpoint + "\x00" + variant
	if v, ok := m.byVariant.Load(key); ok {
		return v.(*variantMetrics)
	}
	v := &variantMetrics{
		invocations: m.invocations.WithLabelValues(endpoint, variant),
		errors4xx:   m.errors4xx.WithLabelValues(endpoint, variant),
		errors5xx:   m.errors5xx.WithLabelValues(endpoint, variant),
		modelErrors: m.modelErrors.WithLabelValues(endpoint, variant),
		model:       m.model.WithLabelValues(endpoint, variant),
		overhead:    m.overhead.WithLabelValues(endpoint, variant),
	}
	got, _ := m.byVariant.LoadOrStore(key, v)
	return got.(*variantMetrics)
}
