package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/storetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "cairn.db"))
	})
}

func TestOpenCreatesParentDirs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "state?#%.db")
	s := open(t, path)
	if _, err := s.ListTypes(t.Context(), store.TypeFilter{}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenCreatesPrivateFiles: the database holds the built-in backend's
// values (secrets, often in plaintext), so a new one, its WAL and shared
// memory file and the directories Open creates for it are its owner's
// only, whatever the umask, as the admin token and a backup are. A file
// that already exists keeps the mode its owner gave it.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix file modes")
	}
	dir := filepath.Join(t.TempDir(), "data", "cairn")
	path := filepath.Join(dir, "cairn.db")
	s := open(t, path)
	if err := s.Update(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.CreateType(ctx, cairn.Type{Path: "cap.type.a", Revision: "0.1.0", CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir, path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for group and others", p, perm)
		}
	}

	shared := filepath.Join(t.TempDir(), "shared.db")
	if err := os.WriteFile(shared, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o640); err != nil {
		t.Fatal(err)
	}
	open(t, shared)
	if fi, err := os.Stat(shared); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("existing database: mode %v, %v; want 0640 kept", fi.Mode().Perm(), err)
	}
}

func TestPersistsAcrossReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	in := cairn.Instance{
		ID:        "00000000-0000-4000-8000-000000000001",
		TypeRef:   cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
		Namespace: "default",
		Name:      "a",
		Labels:    map[string]string{"env": "prod"},
		CreatedAt: created,
		Latest:    cairn.ResourceVersion{ResourceVersion: 1, CreatedAt: created},
	}
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, cairn.Type{Path: "cap.type.a", Revision: "0.1.0", CreatedAt: created}); err != nil {
			return err
		}
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		return tx.PutValue(ctx, in.ID, 1, json.RawMessage(`{"k":"v"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	got, err := s.GetInstances(ctx, []string{in.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("GetInstances after reopen = %v, %v", got, err)
	}
	if got[0].Labels["env"] != "prod" || !got[0].CreatedAt.Equal(created) {
		t.Fatalf("instance after reopen = %+v", got[0])
	}
	if _, err := s.GetType(ctx, cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Value(ctx, in.ID, 1); err != nil || string(v) != `{"k":"v"}` {
		t.Fatalf("Value after reopen = %s, %v", v, err)
	}
}

func schemaVersions(t *testing.T, path string) []int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	for range 3 {
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got := schemaVersions(t, path)
	if len(got) == 0 || got[0] != 1 {
		t.Fatalf("schema_migrations = %v", got)
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("schema_migrations = %v, want 1..n once each", got)
		}
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	s := open(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	newer := len(schemaVersions(t, path)) + 1

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = sqlite.Open(t.Context(), path)
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
}

// SQLite keeps what PostgreSQL's timestamptz and jsonb would not:
// nanoseconds and the exact compact bytes of a document.
func TestNanosecondsAndCompactJSON(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "cairn.db"))
	created := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	in := cairn.Instance{
		ID:        "00000000-0000-4000-8000-000000000001",
		TypeRef:   cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
		Namespace: "default",
		Name:      "a",
		CreatedAt: created,
		Latest: cairn.ResourceVersion{
			ResourceVersion: 1,
			CreatedAt:       created,
			Context:         json.RawMessage(" {\n \"b\": [1, 2],\t\"a\": null }"),
		},
	}
	err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.CreateInstance(ctx, in) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetInstances(ctx, []string{in.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("GetInstances = %v, %v", got, err)
	}
	if want := created.UTC(); got[0].CreatedAt != want || got[0].Latest.CreatedAt != want {
		t.Errorf("createdAt = %v, %v; want %v", got[0].CreatedAt, got[0].Latest.CreatedAt, want)
	}
	if want := `{"b":[1,2],"a":null}`; string(got[0].Latest.Context) != want {
		t.Errorf("context = %s, want %s", got[0].Latest.Context, want)
	}
}

func TestInvalidJSON(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "cairn.db"))
	err := s.Update(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.PutValue(ctx, "x", 1, json.RawMessage(`{"a":`))
	})
	if cairn.ErrorCode(err) != cairn.CodeInvalid {
		t.Fatalf("PutValue(invalid JSON) = %v, want Invalid", err)
	}
}

// Two processes opening a new file at once must not both migrate it.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			s, err := sqlite.Open(t.Context(), path)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	if got := schemaVersions(t, path); len(got) == 0 || got[len(got)-1] != len(got) {
		t.Fatalf("schema_migrations = %v, want 1..n once each", got)
	}
}

// Two stores on one file stand for two cairn processes: their writers
// serialize through SQLite's lock and busy timeout, not process memory.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cairn.db")
	stores := []*sqlite.Store{open(t, path), open(t, path)}
	id := "00000000-0000-4000-8000-000000000001"
	err := stores[0].Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateInstance(ctx, cairn.Instance{
			ID: id, TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, Namespace: "default", Name: "a",
			Latest: cairn.ResourceVersion{ResourceVersion: 1},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	const perStore = 10
	errs := make(chan error, 2*perStore)
	for i := range 2 * perStore {
		s := stores[i%2]
		go func() {
			errs <- s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				got, err := tx.GetInstances(ctx, []string{id})
				if err != nil {
					return err
				}
				return tx.AddResourceVersion(ctx, id, cairn.ResourceVersion{ResourceVersion: got[0].Latest.ResourceVersion + 1})
			})
		}()
	}
	for range 2 * perStore {
		if err := <-errs; err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	rvs, err := stores[1].ResourceVersions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != 2*perStore+1 || rvs[len(rvs)-1].ResourceVersion != 2*perStore+1 {
		t.Fatalf("%d versions, last %d; want %d", len(rvs), rvs[len(rvs)-1].ResourceVersion, 2*perStore+1)
	}
}

// WithoutMigrating opens a store as it is, for a backup, which must not
// change what it backs up: a file that is not there is not created (a
// mistyped --data-dir would back up an empty store), and one an older cairn
// serves is refused, not migrated.
func TestOpenWithoutMigrating(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "cairn.db")
	_, err := sqlite.Open(t.Context(), missing, sqlite.WithoutMigrating())
	if !errors.Is(err, sqlite.ErrNoStore) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open of a missing file without migrating: %v, want ErrNoStore naming the file", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused Open created %s: %v", filepath.Dir(missing), err)
	}

	older := filepath.Join(dir, "older.db")
	if err := open(t, older).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version = ?`, sqlite.SchemaVersion()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(t.Context(), older, sqlite.WithoutMigrating())
	if !errors.Is(err, sqlite.ErrSchemaTooOld) || !strings.Contains(err.Error(), "use the cairn that serves it, or run cairn migrate first") {
		t.Errorf("Open of an older schema without migrating: %v, want ErrSchemaTooOld", err)
	}
	if got := schemaVersions(t, older); len(got) != sqlite.SchemaVersion()-1 {
		t.Errorf("the older store was migrated: %v", got)
	}

	current := filepath.Join(dir, "current.db")
	if err := open(t, current).Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), current, sqlite.WithoutMigrating())
	if err != nil {
		t.Fatalf("Open of a current store without migrating: %v", err)
	}
	s.Close()
}

// A data directory cairn may not write in (a read-only file system, one
// owned by someone else) is refused at Open with an error that says so,
// not with SQLite's bare "unable to open database file", for a backup
// (which opens without migrating) too.
func TestOpenUnwritableDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.db")
	want := "permission denied"
	if os.Geteuid() == 0 {
		// Root writes in any directory whatever its mode: a tmpfs
		// remounted read-only refuses it too.
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
			t.Skipf("root, and no tmpfs can be mounted to make a read-only directory: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		want = "read-only file system"
	}
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	if want == "read-only file system" {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, "size=4m"); err != nil {
			t.Fatalf("remount %s read-only: %v", dir, err)
		}
	} else {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	for _, opts := range [][]sqlite.Option{nil, {sqlite.WithoutMigrating()}} {
		_, err := sqlite.Open(t.Context(), path, opts...)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open in an unwritable directory: %v; want an error naming %s and %q", err, dir, want)
		}
	}
}
