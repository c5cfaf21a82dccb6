package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// Migration 7 rebuilds resource_versions WITHOUT ROWID: the versions of a
// database at version 6 are all there afterwards, and the table keeps its
// key and its cascade from instances.
func TestMigration7KeepsResourceVersions(t *testing.T) {
	ctx := t.Context()
	s := migratedFrom(t, 6,
		`INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, latest_rv) VALUES ('a', 't', '1', '1', 'd', 'a', 2), ('b', 't', '1', '1', 'd', 'b', 1)`,
		`INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context)
		 VALUES ('a', 1, 'x', 10, NULL, '{"k":1}'), ('a', 2, 'y', 20, '[{"path":"p","revision":"r"}]', NULL), ('b', 1, 'z', 30, NULL, NULL)`,
	)
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

// Migration 8 drops the label and attribute indexes by key and by path: a
// database at version 7 keeps its labels and attributes, and label and
// attribute filters select as before, by the tables' primary keys.
func TestMigration8KeepsLabelsAndAttributes(t *testing.T) {
	ctx := t.Context()
	s := migratedFrom(t, 7,
		`INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, latest_rv)
		 VALUES ('a', 't', '1', '1', 'd', 'a', 1), ('b', 't', '1', '1', 'd', 'b', 1), ('c', 't', '1', '1', 'd', 'c', 1)`,
		`INSERT INTO resource_versions (instance_id, resource_version) VALUES ('a', 1), ('b', 1), ('c', 1)`,
		`INSERT INTO instance_labels (instance_id, key, value) VALUES ('a', 'env', 'prod'), ('a', 'team', 'x'), ('b', 'env', 'dev')`,
		`INSERT INTO latest_attributes (instance_id, path, revision) VALUES ('a', 'cap.attribute.p', '0.1.0'), ('c', 'cap.attribute.p', '0.2.0')`,
	)
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('instance_labels_key', 'latest_attributes_path')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("indexes left after migration 8: %d, %v", n, err)
	}
	got, err := s.GetInstances(ctx, []string{"a", "b", "c"})
	if err != nil || len(got) != 3 {
		t.Fatalf("instances after migration 8: %v, %v", got, err)
	}
	if l := got[0].Labels; len(l) != 2 || l["env"] != "prod" || l["team"] != "x" || got[1].Labels["env"] != "dev" || got[2].Labels != nil {
		t.Errorf("labels after migration 8: %v, %v, %v", got[0].Labels, got[1].Labels, got[2].Labels)
	}
	for _, c := range []struct {
		name string
		f    store.InstanceFilter
		want string
	}{
		{"env=prod", store.InstanceFilter{Labels: []labels.Requirement{{Key: "env", Operator: labels.Equals, Values: []string{"prod"}}}}, "a"},
		{"env in (prod, dev)", store.InstanceFilter{Labels: []labels.Requirement{{Key: "env", Operator: labels.In, Values: []string{"prod", "dev"}}}}, "a,b"},
		{"!team", store.InstanceFilter{Labels: []labels.Requirement{{Key: "team", Operator: labels.DoesNotExist}}}, "b,c"},
		{"attribute p", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attribute.p"}}}, "a,c"},
		{"attribute p 0.2.0", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attribute.p", Revision: "0.2.0"}}}, "c"},
		{"not attribute p", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attribute.p", Exclude: true}}}, "b"},
	} {
		list, err := s.ListInstances(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ids []string
		for _, in := range list {
			ids = append(ids, in.ID)
		}
		slices.Sort(ids)
		if got := strings.Join(ids, ","); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// Relabelling after the migration works as before.
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMetadata(ctx, "c", map[string]string{"env": "prod"}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListInstances(ctx, store.InstanceFilter{Labels: []labels.Requirement{{Key: "env", Operator: labels.Equals, Values: []string{"prod"}}}})
	if err != nil || len(list) != 2 {
		t.Errorf("env=prod after relabelling c: %v, %v", list, err)
	}
}

// migratedFrom creates a database file with the first version migrations
// applied and recorded, as a cairn of that version left it, runs rows (SQL
// statements) in it, and opens it as this cairn does, migrating it.
func migratedFrom(t *testing.T, version int, rows ...string) *Store {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cairn.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:version] {
		if _, err := db.ExecContext(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, v+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range rows {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
