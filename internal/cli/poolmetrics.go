package cli

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/store/postgres"
)

// registerPoolMetrics exports a PostgreSQL store's connection pool on
// /metrics: what to alert on before requests queue for a connection
// (acquire waits growing, connections in use at the pool's size).
func registerPoolMetrics(reg prometheus.Registerer, st *postgres.Store) error {
	gauge := func(name, help string, labels prometheus.Labels, f func(postgres.PoolStats) int32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(f(st.PoolStats())) })
	}
	counter := func(name, help string, f func(postgres.PoolStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return f(st.PoolStats()) })
	}
	const conns = "Connections of this replica's PostgreSQL pool, by state."
	for _, c := range []prometheus.Collector{
		gauge("cairn_postgres_pool_max_connections", "The size of this replica's PostgreSQL connection pool (pool_max_conns).", nil,
			func(s postgres.PoolStats) int32 { return s.MaxConns }),
		gauge("cairn_postgres_pool_connections", conns, prometheus.Labels{"state": "acquired"},
			func(s postgres.PoolStats) int32 { return s.AcquiredConns }),
		gauge("cairn_postgres_pool_connections", conns, prometheus.Labels{"state": "idle"},
			func(s postgres.PoolStats) int32 { return s.IdleConns }),
		gauge("cairn_postgres_pool_connections", conns, prometheus.Labels{"state": "constructing"},
			func(s postgres.PoolStats) int32 { return s.ConstructingConns }),
		counter("cairn_postgres_pool_acquires_total", "Connections taken from the pool.",
			func(s postgres.PoolStats) float64 { return float64(s.Acquires) }),
		counter("cairn_postgres_pool_acquire_waits_total", "Acquires that waited for a connection: the pool was exhausted.",
			func(s postgres.PoolStats) float64 { return float64(s.WaitedAcquires) }),
		counter("cairn_postgres_pool_acquire_wait_seconds_total", "Time acquires spent waiting for a connection.",
			func(s postgres.PoolStats) float64 { return s.Waited.Seconds() }),
		counter("cairn_postgres_pool_acquires_canceled_total", "Acquires whose request ended before it got a connection.",
			func(s postgres.PoolStats) float64 { return float64(s.CanceledAcquires) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register PostgreSQL pool metrics: %w", err)
		}
	}
	return nil
}
