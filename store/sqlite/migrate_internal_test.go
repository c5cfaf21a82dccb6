package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
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

// Migration 9 rebuilds builtin_values WITHOUT ROWID: the values of a
// database at version 8 are all there afterwards, a second value of a
// version is still refused (kept as it was), and every query of the
// table reads it by its key.
func TestMigration9KeepsBuiltinValues(t *testing.T) {
	ctx := t.Context()
	big := strings.Repeat("x", 9000) // past a page: overflow pages either way
	s := migratedFrom(t, 8,
		`INSERT INTO builtin_values (instance_id, resource_version, value)
		 VALUES ('a', 1, '{"v":1}'), ('a', 2, '{"v":2}'), ('b', 1, NULL), ('c', 1, '"`+big+`"')`,
	)
	var ddl string
	if err := s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'builtin_values'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Errorf("builtin_values after migration 9: %s", ddl)
	}
	vs, err := s.Values(ctx, []store.ValueKey{{InstanceID: "a", ResourceVersion: 2}, {InstanceID: "c", ResourceVersion: 1}, {InstanceID: "a", ResourceVersion: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if string(vs[0]) != `{"v":2}` || string(vs[1]) != `"`+big+`"` || string(vs[2]) != `{"v":1}` {
		t.Errorf("values after migration 9: %.40q", vs)
	}
	if v, err := s.Value(ctx, "b", 1); err != nil || v != nil {
		t.Errorf("the NULL value after migration 9: %q, %v", v, err)
	}
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutValue(ctx, "a", 1, []byte(`{"v":"other"}`)); err == nil {
			t.Error("a second value of a version was taken")
		}
		if err := tx.PutValue(ctx, "d", 1, []byte(`{"v":4}`)); err != nil {
			return err
		}
		return tx.DeleteValues(ctx, "c")
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Value(ctx, "a", 1); err != nil || string(v) != `{"v":1}` {
		t.Errorf("value a/1 after a second put: %s, %v", v, err)
	}
	if v, err := s.Value(ctx, "d", 1); err != nil || string(v) != `{"v":4}` {
		t.Errorf("value d/1: %s, %v", v, err)
	}
	if ok, err := s.HasValues(ctx, "c"); err != nil || ok {
		t.Errorf("values of c after deleting them: %v, %v", ok, err)
	}
	// Every query of the table seeks its primary key: none scans it.
	for _, q := range []string{qValue, qValues, qHasValues, qDeleteValues, qDeleteValue} {
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, queryPlanArgs(q)...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		seeks := false
		for _, d := range plan {
			seeks = seeks || strings.HasPrefix(d, "SEARCH ") && strings.Contains(d, "USING PRIMARY KEY")
			if strings.HasPrefix(d, "SCAN ") && d != "SCAN CONSTANT ROW" && !strings.HasPrefix(d, "SCAN j VIRTUAL TABLE") {
				seeks = false
				break
			}
		}
		if !seeks {
			t.Errorf("%s:\n%s", q, strings.Join(plan, "\n"))
		}
	}
}

// queryPlanArgs is a NULL for each parameter of q.
func queryPlanArgs(q string) []any {
	return make([]any, strings.Count(q, "?"))
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

// Migration 10 drops the uses rows that name an instance's own backend and
// rebuilds changes without AUTOINCREMENT: relations read the same, the
// change log keeps its rows and position, and no Seq is given twice, also
// once every change was pruned.
func TestMigration10KeepsRelationsAndSeqs(t *testing.T) {
	ctx := t.Context()
	const (
		instances = `INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, backend_id, latest_rv)
		 VALUES ('b', 't', '1', '1', 'd', 'b', 'b', 1), ('g', 't', '1', '1', 'd', 'g', 'b', 1),
		 ('x', 't', '1', '1', 'd', 'x', 'g', 1), ('y', 't', '1', '1', 'd', 'y', 'b', 1)`
		versions = `INSERT INTO resource_versions (instance_id, resource_version) VALUES ('b', 1), ('g', 1), ('x', 1), ('y', 1)`
		uses     = `INSERT INTO uses (from_id, to_id) VALUES ('g', 'b'), ('x', 'g'), ('y', 'b'), ('y', 'x')`
		changes  = `INSERT INTO changes (kind, instance_id, type_path, type_revision, namespace, name, at)
		 VALUES ('ADDED', 'b', 't', '1', 'd', 'b', 1), ('ADDED', 'g', 't', '1', 'd', 'g', 2),
		 ('ADDED', 'x', 't', '1', 'd', 'x', 3), ('ADDED', 'y', 't', '1', 'd', 'y', 4), ('MODIFIED', 'y', 't', '1', 'd', 'y', 5)`
	)
	lastSeq := func(s *Store) int64 {
		t.Helper()
		seq, err := s.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	// touch logs a change of x and returns its Seq.
	touch := func(s *Store) int64 {
		t.Helper()
		var seq int64
		err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := tx.SetStatus(ctx, "x", []byte(`{"n":1}`)); err != nil {
				return err
			}
			var err error
			seq, err = tx.LastSeq(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}

	s := migratedFrom(t, 9, instances, versions, uses, changes,
		`DELETE FROM changes WHERE seq <= 2`, `UPDATE changes_pruned SET through = 2`)
	var rows int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM uses`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("uses rows after migration 10: %d, %v; want the one not to a backend", rows, err)
	}
	var ddl string
	if err := s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'changes'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ddl, "AUTOINCREMENT") {
		t.Errorf("changes after migration 10: %s", ddl)
	}
	got, err := s.GetInstances(ctx, []string{"b", "g", "x", "y"})
	if err != nil || len(got) != 4 {
		t.Fatalf("instances after migration 10: %v, %v", got, err)
	}
	listed, err := s.ListInstances(ctx, store.InstanceFilter{})
	if err != nil || len(listed) != 4 {
		t.Fatalf("listed after migration 10: %v, %v", listed, err)
	}
	want := [][2][]string{{nil, {"g", "y"}}, {{"b"}, {"x"}}, {{"g"}, {"y"}}, {{"b", "x"}, nil}}
	for i, w := range want {
		for _, in := range []struct{ uses, usedBy []string }{{got[i].Uses, got[i].UsedBy}, {listed[i].Uses, listed[i].UsedBy}} {
			if !slices.Equal(in.uses, w[0]) || !slices.Equal(in.usedBy, w[1]) {
				t.Errorf("%s after migration 10: uses %q, used by %q; want %q, %q", got[i].ID, in.uses, in.usedBy, w[0], w[1])
			}
		}
	}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, "g") }); !cairnCode(err, "UsedBy") {
		t.Errorf("deleting a backend in use after migration 10: %v", err)
	}
	cs, err := s.Changes(ctx, 2, 0)
	if err != nil || len(cs) != 3 || cs[0].Seq != 3 || cs[2].Seq != 5 || cs[2].Kind != store.Modified {
		t.Fatalf("changes after 2 after migration 10: %+v, %v", cs, err)
	}
	if _, err := s.Changes(ctx, 1, 0); !cairnCode(err, "Gone") {
		t.Errorf("changes after 1 (pruned) after migration 10: %v", err)
	}
	if seq := lastSeq(s); seq != 5 {
		t.Errorf("LastSeq after migration 10 = %d, want 5", seq)
	}
	if seq := touch(s); seq != 6 {
		t.Errorf("the first change after migration 10 has Seq %d, want 6", seq)
	}
	// Every change pruned: the next is still past them.
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PruneChanges(ctx, 6) }); err != nil {
		t.Fatal(err)
	}
	if seq := lastSeq(s); seq != 6 {
		t.Errorf("LastSeq with every change pruned = %d, want 6", seq)
	}
	if seq := touch(s); seq != 7 {
		t.Errorf("the change after pruning every one has Seq %d, want 7", seq)
	}

	// A log emptied without pruning (a restore's Clear did that) keeps its
	// position as the pruned one.
	s = migratedFrom(t, 9, instances, versions, changes, `DELETE FROM changes`)
	if seq := lastSeq(s); seq != 5 {
		t.Errorf("LastSeq of an emptied log after migration 10 = %d, want 5", seq)
	}
	if _, err := s.Changes(ctx, 0, 0); !cairnCode(err, "Gone") {
		t.Errorf("changes after 0 of an emptied log after migration 10: %v", err)
	}
	if seq := touch(s); seq != 6 {
		t.Errorf("the first change after migrating an emptied log has Seq %d, want 6", seq)
	}
}

func cairnCode(err error, code string) bool { return string(cairn.ErrorCode(err)) == code }
