package postgres_test

import (
	"testing"

	"github.com/cairn-dev/cairn/hub/replicatest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// Several hubs, each on its own connection pool to one schema: PostgreSQL
// is all they share.
func TestReplicas(t *testing.T) {
	pgtest.DSN(t)
	replicatest.Run(t, func(t *testing.T) replicatest.Database {
		sc := pgtest.NewSchema(t)
		return replicatest.Database{Kind: "postgresql", Open: func(t *testing.T) store.Store { return sc.Open(t) }}
	})
}
