package postgres_test

import (
	"testing"

	"github.com/cairn-dev/cairn/hub/hubbench"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// BenchmarkHub runs the hub's core benchmarks (hub/bench_test.go runs them
// on SQLite) on PostgreSQL, each on a fresh schema:
//
//	CAIRN_TEST_POSTGRES=postgres://... go test -run x -bench Hub -benchmem ./store/postgres
func BenchmarkHub(b *testing.B) {
	pgtest.DSN(b)
	hubbench.All(b, hubbench.Opener{Kind: "postgresql", Open: func(b *testing.B) store.Store { return pgtest.Open(b) }})
}
