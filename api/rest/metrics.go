package rest

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PrometheusMetrics counts requests and their latency by route, method and
// status code. Routes are templates (/apis/{group}/{version}/...), so the
// label sets stay bounded whatever clients request.
type PrometheusMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// series keeps each label set's counter and histogram (a
	// seriesKey's), so a request costs one map lookup rather than two
	// label hashes; bounded as the label sets are.
	series sync.Map
}

type seriesKey struct {
	route, method string
	status        int
}

type seriesOf struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// NewPrometheusMetrics registers the metrics with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_http_requests_total",
			Help: "HTTP requests served, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_http_request_duration_seconds",
			Help:    "HTTP request latency, by route template, method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe records one request.
func (m *PrometheusMetrics) Observe(route, method string, status int, d time.Duration) {
	k := seriesKey{route, methodLabel(method), status}
	v, ok := m.series.Load(k)
	if !ok {
		code := strconv.Itoa(status)
		v, _ = m.series.LoadOrStore(k, seriesOf{
			requests: m.requests.WithLabelValues(route, k.method, code),
			latency:  m.latency.WithLabelValues(route, k.method, code),
		})
	}
	s := v.(seriesOf)
	s.requests.Inc()
	s.latency.Observe(d.Seconds())
}

// methodLabel is the method as a label: HTTP's own methods as they are,
// any other "other". A client may send any token as its method, and one
// allowed every verb (a role with verbs ["*"]) would otherwise add label
// sets, which are never freed, without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
