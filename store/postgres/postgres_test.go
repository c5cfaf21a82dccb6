package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/storetest"
)

func TestContract(t *testing.T) {
	pgtest.DSN(t) // skip (or fail in CI) once, not per subtest
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.Open(t) })
}

// schemaConn is a connection of its own to the test's schema, closed when
// the test ends.
func schemaConn(t *testing.T, sc pgtest.Schema) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(sc.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = sc.Name
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// schemaVersions lists schema_migrations in the schema.
func schemaVersions(t *testing.T, sc pgtest.Schema) []int {
	t.Helper()
	ctx := t.Context()
	conn := schemaConn(t, sc)
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantAllVersionsOnce(t *testing.T, got []int) {
	t.Helper()
	if len(got) != postgres.SchemaVersion() {
		t.Fatalf("schema_migrations = %v, want 1..%d once each", got, postgres.SchemaVersion())
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("schema_migrations = %v, want 1..%d once each", got, postgres.SchemaVersion())
		}
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	sc := pgtest.NewSchema(t)
	for range 3 {
		s := sc.Open(t)
		v, err := s.Version(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if v != postgres.SchemaVersion() {
			t.Fatalf("Version = %d, want %d", v, postgres.SchemaVersion())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wantAllVersionsOnce(t, schemaVersions(t, sc))
}

// Data written before a reopen is there after it: Open migrates nothing
// twice and drops nothing.
func TestPersistsAcrossReopen(t *testing.T) {
	ctx := t.Context()
	sc := pgtest.NewSchema(t)
	s := sc.Open(t)
	in := cairn.Instance{
		ID: "00000000-0000-4000-8000-000000000001", TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
		Namespace: "default", Name: "a", Labels: map[string]string{"env": "prod"},
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC),
		Latest:    cairn.ResourceVersion{ResourceVersion: 1},
	}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		return tx.PutValue(ctx, in.ID, 1, json.RawMessage(`{"k":"v"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = sc.Open(t)
	got, err := s.GetInstances(ctx, []string{in.ID})
	if err != nil || len(got) != 1 || got[0].Labels["env"] != "prod" || !got[0].CreatedAt.Equal(in.CreatedAt) {
		t.Fatalf("GetInstances after reopen = %+v, %v", got, err)
	}
	if v, err := s.Value(ctx, in.ID, 1); err != nil || string(v) != `{"k":"v"}` {
		t.Fatalf("Value after reopen = %s, %v", v, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	sc := pgtest.NewSchema(t)
	if err := sc.Open(t).Close(); err != nil {
		t.Fatal(err)
	}
	newer := postgres.SchemaVersion() + 1
	sc.Exec(t, `INSERT INTO schema_migrations (version) VALUES ($1)`, newer)

	_, err := postgres.Open(t.Context(), sc.DSN, postgres.WithSchema(sc.Name))
	if !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	want := fmt.Sprintf("database schema version %d is newer than this cairn binary supports (%d); upgrade cairn", newer, postgres.SchemaVersion())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	var tooNew *postgres.SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Version != newer || tooNew.Supported != postgres.SchemaVersion() {
		t.Errorf("error %v: SchemaTooNewError = %+v", err, tooNew)
	}
	if strings.Contains(err.Error(), "cairn:cairn@") || !strings.Contains(err.Error(), sc.Name) {
		t.Errorf("error %q shows the password or does not name the schema", err)
	}
}

// Replicas starting together on a new database: every Open succeeds and
// every step is applied once.
func TestConcurrentMigrations(t *testing.T) {
	sc := pgtest.NewSchema(t)
	const n = 6
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			s, err := postgres.Open(t.Context(), sc.DSN, postgres.WithSchema(sc.Name), postgres.WithMaxConns(2))
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	wantAllVersionsOnce(t, schemaVersions(t, sc))
}

func TestMissingSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, err := postgres.Open(t.Context(), dsn, postgres.WithSchema("cairn_no_such_schema"))
	if err == nil || !strings.Contains(err.Error(), "search_path names no existing schema (create it, or fix search_path in the connection URL)") {
		t.Fatalf("Open with a missing schema: %v", err)
	}
}

func TestBadDSN(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://cairn:secret@127.0.0.1:5432/cairn?sslmode=bogus")
	if cairn.ErrorCode(err) != cairn.CodeInvalid {
		t.Fatalf("Open(bad DSN) = %v, want Invalid", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens, the connection is refused.
	_, err := postgres.Open(ctx, "postgres://cairn:secret@127.0.0.1:1/cairn?sslmode=disable&connect_timeout=5")
	if cairn.ErrorCode(err) != cairn.CodeUnavailable {
		t.Fatalf("Open(unreachable) = %v, want Unavailable", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the password", err)
	}
}

// TestUnreachableOrMisconfigured: cairn serve waits for a database that
// cannot be reached yet (not up, not resolvable, not taking connections)
// and gives up at once on one that answered no (a wrong password, a
// missing database or schema), which waiting would never cure.
func TestUnreachableOrMisconfigured(t *testing.T) {
	dsn := pgtest.DSN(t)
	with := func(edit func(u *url.URL)) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		edit(u)
		return u.String()
	}
	for _, c := range []struct {
		name string
		dsn  string
		opts []postgres.Option
		want bool
	}{
		{"refused", "postgres://cairn:secret@127.0.0.1:1/cairn?sslmode=disable", nil, true},
		{"a host name that does not resolve", "postgres://cairn:secret@cairn-db.invalid:5432/cairn?sslmode=disable&connect_timeout=5", nil, true},
		{"a wrong password", with(func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "not-the-password") }), nil, false},
		{"a database that does not exist", with(func(u *url.URL) { u.Path = "/cairn_no_such_database" }), nil, false},
		{"a schema that does not exist", dsn, []postgres.Option{postgres.WithSchema("cairn_no_such_schema")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := postgres.Open(ctx, c.dsn, c.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if got := postgres.Unreachable(err); got != c.want {
				t.Errorf("Unreachable(%v) = %v, want %v", err, got, c.want)
			}
		})
	}
}

// What PostgreSQL keeps differs from SQLite only in precision: microsecond
// timestamps. JSON is kept as the compact text the store wrote (key order
// and \u0000 included), unlike jsonb.
func TestMicrosecondsAndCompactJSON(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	created := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	in := cairn.Instance{
		ID: "00000000-0000-4000-8000-000000000001", TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
		Namespace: "default", Name: "a", CreatedAt: created,
		Latest: cairn.ResourceVersion{ResourceVersion: 1, CreatedAt: created,
			Context: json.RawMessage(" {\n \"b\": [1, 2],\t\"a\": \"\\u0000\" }")},
	}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.CreateInstance(ctx, in) }); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetInstances(ctx, []string{in.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("GetInstances = %v, %v", got, err)
	}
	if want := created.UTC().Truncate(time.Microsecond); got[0].CreatedAt != want || got[0].Latest.CreatedAt != want {
		t.Errorf("createdAt = %v, %v; want %v", got[0].CreatedAt, got[0].Latest.CreatedAt, want)
	}
	if want := `{"b":[1,2],"a":"\u0000"}`; string(got[0].Latest.Context) != want {
		t.Errorf("context = %s, want %s", got[0].Latest.Context, want)
	}
}

func TestInvalidInput(t *testing.T) {
	s := pgtest.Open(t)
	for name, fn := range map[string]func(ctx context.Context, tx store.Tx) error{
		"invalid JSON": func(ctx context.Context, tx store.Tx) error {
			return tx.PutValue(ctx, "x", 1, json.RawMessage(`{"a":`))
		},
		"time out of range": func(ctx context.Context, tx store.Tx) error {
			return tx.CreateType(ctx, cairn.Type{Path: "cap.type.a", Revision: "0.1.0", CreatedAt: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)})
		},
		"NUL in a name": func(ctx context.Context, tx store.Tx) error {
			return tx.CreateInstance(ctx, cairn.Instance{ID: "00000000-0000-4000-8000-000000000001",
				TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, Namespace: "default", Name: "a\x00b"})
		},
	} {
		err := s.Update(t.Context(), fn)
		if cairn.ErrorCode(err) != cairn.CodeInvalid {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
}

// A deadlock between two transactions is resolved by PostgreSQL aborting
// one; Update runs that one's fn again and both commit.
func TestDeadlockRetried(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	ids := []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		for i, id := range ids {
			if err := tx.CreateInstance(ctx, cairn.Instance{ID: id, TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
				Namespace: "default", Name: fmt.Sprint(i), Latest: cairn.ResourceVersion{ResourceVersion: 1}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Each transaction locks one instance, waits until the other has
	// locked its own, then locks the other's: a guaranteed deadlock.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		attempts = map[int]int{}
		locked   = [2]chan struct{}{make(chan struct{}), make(chan struct{})}
		once     = [2]sync.Once{}
	)
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			errs <- s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				mu.Lock()
				attempts[w]++
				first := attempts[w] == 1
				mu.Unlock()
				if _, err := tx.GetInstancesBrief(ctx, []string{ids[w]}); err != nil {
					return err
				}
				if first {
					once[w].Do(func() { close(locked[w]) })
					<-locked[1-w]
				}
				if _, err := tx.GetInstancesBrief(ctx, []string{ids[1-w]}); err != nil {
					return err
				}
				return tx.SetLockedBy(ctx, ids, fmt.Sprint("owner-", w))
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	if attempts[0]+attempts[1] < 3 {
		t.Fatalf("attempts = %v: no transaction was retried, so there was no deadlock", attempts)
	}
}

// Migration 6 drops the uses rows that name an instance's own backend:
// the edge reads the same from instances.backend_id, and the other rows
// stay. The rows are written as a cairn before it left them.
func TestMigration6DropsBackendUses(t *testing.T) {
	ctx := t.Context()
	sc := pgtest.NewSchema(t)
	s := sc.Open(t)
	backend := cairn.Instance{ID: "00000000-0000-4000-8000-000000000001", TypeRef: cairn.TypeRef{Path: "cap.type.b", Revision: "0.1.0"},
		Namespace: "system", Name: "backend", Latest: cairn.ResourceVersion{ResourceVersion: 1}}
	backend.Backend.ID = backend.ID
	a, b := backend, backend
	a.ID, a.Name, a.Backend.ID = "00000000-0000-4000-8000-000000000002", "a", backend.ID
	b.ID, b.Name, b.Backend.ID = "00000000-0000-4000-8000-000000000003", "b", backend.ID
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, in := range []cairn.Instance{backend, a, b} {
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
		}
		return tx.AddUses(ctx, b.ID, a.ID)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sc.Exec(t, `INSERT INTO uses (from_id, to_id) VALUES ($1, $2), ($3, $2)`, a.ID, backend.ID, b.ID)
	sc.Exec(t, `DELETE FROM schema_migrations WHERE version = 6`)
	s = sc.Open(t)
	if err := s.Snapshot(ctx, func(ctx context.Context, r store.Reader) error {
		got, err := r.GetInstances(ctx, []string{backend.ID, a.ID, b.ID})
		if err != nil {
			return err
		}
		want := [][2][]string{{nil, {a.ID, b.ID}}, {{backend.ID}, {b.ID}}, {{backend.ID, a.ID}, nil}} // one Type: by id
		for i, w := range want {
			if !slices.Equal(got[i].Uses, w[0]) || !slices.Equal(got[i].UsedBy, w[1]) {
				t.Errorf("%s after migration 6: uses %q, used by %q; want %q, %q", got[i].Name, got[i].Uses, got[i].UsedBy, w[0], w[1])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := schemaConn(t, sc).QueryRow(ctx, `SELECT count(*) FROM uses`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("uses rows after migration 6: %d, %v; want the one not to a backend", rows, err)
	}
}

// An operator migrates with a role owning the schema and serves with one
// that may only read and write its tables: a store already at this
// binary's version opens without CREATE on its schema, and one that needs
// a migration says which privilege is missing and what to do.
func TestOpenWithoutCreatePrivilege(t *testing.T) {
	ctx := t.Context()
	migrated, fresh := pgtest.NewSchema(t), pgtest.NewSchema(t)
	if err := migrated.Open(t).Close(); err != nil {
		t.Fatal(err)
	}
	conn := schemaConn(t, migrated)
	var super bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if super {
		t.Skip("the test role is a superuser, which no privilege check applies to")
	}
	// The owner's own privileges can be revoked, as another role's would be.
	for _, sc := range []pgtest.Schema{migrated, fresh} {
		sc.Exec(t, `REVOKE CREATE ON SCHEMA `+pgx.Identifier{sc.Name}.Sanitize()+` FROM CURRENT_USER`)
	}

	s := migrated.Open(t)
	in := cairn.Instance{ID: "00000000-0000-4000-8000-000000000001", TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
		Namespace: "default", Name: "a", Latest: cairn.ResourceVersion{ResourceVersion: 1}}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		return tx.PutValue(ctx, in.ID, 1, json.RawMessage(`{}`))
	}); err != nil {
		t.Fatalf("write without CREATE on the schema: %v", err)
	}

	_, err := postgres.Open(ctx, fresh.DSN, postgres.WithSchema(fresh.Name))
	if err == nil {
		t.Fatal("Open of an unmigrated schema without CREATE on it succeeded")
	}
	for _, want := range []string{"permission denied", "CREATE", fresh.Name, "cairn migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// WithoutMigrating opens a store as it is, for a backup, which must not
// change what it backs up: a schema cairn never migrated, or one an older
// cairn serves, is refused and left alone.
func TestOpenWithoutMigrating(t *testing.T) {
	ctx := t.Context()
	empty, older, current := pgtest.NewSchema(t), pgtest.NewSchema(t), pgtest.NewSchema(t)
	for _, sc := range []pgtest.Schema{older, current} {
		if err := sc.Open(t).Close(); err != nil {
			t.Fatal(err)
		}
	}
	older.Exec(t, `DELETE FROM schema_migrations WHERE version = $1`, postgres.SchemaVersion())

	_, err := postgres.Open(ctx, empty.DSN, postgres.WithSchema(empty.Name), postgres.WithoutMigrating())
	if !errors.Is(err, postgres.ErrNoSchema) || !strings.Contains(err.Error(), "holds no cairn tables") {
		t.Errorf("Open of an empty schema without migrating: %v, want ErrNoSchema", err)
	}
	var exists bool
	if err := schemaConn(t, empty).QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Errorf("schema_migrations in the empty schema after the refused Open: %v, %v", exists, err)
	}

	_, err = postgres.Open(ctx, older.DSN, postgres.WithSchema(older.Name), postgres.WithoutMigrating())
	want := fmt.Sprintf("database schema version %d is older than this cairn binary's (%d)", postgres.SchemaVersion()-1, postgres.SchemaVersion())
	if !errors.Is(err, postgres.ErrSchemaTooOld) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open of an older schema without migrating: %v, want ErrSchemaTooOld saying %q", err, want)
	}
	if got := schemaVersions(t, older); len(got) != postgres.SchemaVersion()-1 {
		t.Errorf("the older schema was migrated: %v", got)
	}

	s, err := postgres.Open(ctx, current.DSN, postgres.WithSchema(current.Name), postgres.WithoutMigrating())
	if err != nil {
		t.Fatalf("Open of a current schema without migrating: %v", err)
	}
	s.Close()
}
