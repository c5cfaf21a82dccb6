package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// Migration 7 rebuilds resource_versions WITHOUT ROWID: the versions of a
// database at version 6 are all there afterwards, and the table keeps its
// key and its cascade from instances.
func TestMigration7KeepsResourceVersions(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cairn.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:6] {
		if _, err := db.ExecContext(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, v+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, latest_rv) VALUES ('a', 't', '1', '1', 'd', 'a', 2), ('b', 't', '1', '1', 'd', 'b', 1)`,
		`INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context)
		 VALUES ('a', 1, 'x', 10, NULL, '{"k":1}'), ('a', 2, 'y', 20, '[{"path":"p","revision":"r"}]', NULL), ('b', 1, 'z', 30, NULL, NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vs, err := s.ResourceVersionsOf(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs["a"]) != 2 || len(vs["b"]) != 1 || vs["a"][1].CreatedBy != "y" || len(vs["a"][1].Attributes) != 1 ||
		string(vs["a"][0].Context) != `{"k":1}` || vs["b"][0].CreatedBy != "z" {
		t.Fatalf("versions after migration 7 = %+v", vs)
	}
	var ddl string
	if err := s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'resource_versions'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Errorf("resource_versions after migration 7: %s", ddl)
	}
	// The key refuses a second version 1, and deleting the instance
	// takes its versions.
	err = s.Update(ctx, func(ctx context.Context, stx store.Tx) error {
		tx := stx.(*tx)
		if _, err := tx.exec(ctx, `INSERT INTO resource_versions (instance_id, resource_version) VALUES ('b', 1)`); !isUniqueFailure(err) {
			t.Errorf("a second version 1: %v, want a unique failure", err)
		}
		return tx.DeleteInstance(ctx, "b")
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM resource_versions WHERE instance_id = 'b'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("versions of a deleted instance: %d, %v", n, err)
	}
}
