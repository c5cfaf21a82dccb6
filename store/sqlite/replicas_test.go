package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/hub/replicatest"
	"github.com/cairn-dev/cairn/store"
)

// Several hubs on their own stores on one file: SQLite's file locks are all
// they share.
func TestReplicas(t *testing.T) {
	replicatest.Run(t, func(t *testing.T) replicatest.Database {
		path := filepath.Join(t.TempDir(), "cairn.db")
		return replicatest.Database{Kind: "sqlite", Open: func(t *testing.T) store.Store { return open(t, path) }}
	})
}
