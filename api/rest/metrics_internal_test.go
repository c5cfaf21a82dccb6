package rest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsMethodsBounded: a client that may send any method (a role with
// verbs ["*"]) cannot grow the label sets, and so the server's memory,
// by inventing methods: those outside HTTP's own are counted as "other".
func TestMetricsMethodsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m.Observe("/apis", fmt.Sprintf("X%d", i), http.StatusMethodNotAllowed, time.Millisecond)
	}
	m.Observe("/apis", http.MethodGet, http.StatusOK, time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "method" {
					methods[l.GetValue()] = true
				}
			}
		}
	}
	if len(methods) != 2 || !methods["GET"] || !methods["other"] {
		t.Errorf("method labels %v, want GET and other", methods)
	}
}
