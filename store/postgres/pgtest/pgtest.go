// Package pgtest gives tests and benchmarks a real PostgreSQL: the database
// named by the DSN in $CAIRN_TEST_POSTGRES, with a fresh, uniquely named
// schema per test that is dropped when the test ends.
//
// Without the variable the caller is skipped with a loud message saying how
// to run it; when CI=true it fails instead, so a CI run can never pass with
// the PostgreSQL suites silently skipped. scripts/with-services starts a local
// PostgreSQL and sets the variable.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store/postgres"
)

// EnvDSN names the environment variable holding the test database's DSN.
const EnvDSN = "CAIRN_TEST_POSTGRES"

const howTo = `
************************************************************************
*** PostgreSQL tests SKIPPED: $CAIRN_TEST_POSTGRES is not set.
*** Run them against a real PostgreSQL (the role needs CREATE on the
*** database; each test works in a schema of its own):
***   CAIRN_TEST_POSTGRES='postgres://cairn:cairn@127.0.0.1:5432/cairn_test?sslmode=disable' \
***     go test ./store/... ./hub/...
*** scripts/with-services starts a local PostgreSQL and sets it for you.
************************************************************************`

// DSN returns the test database's DSN, skipping tb (failing it when
// CI=true) when there is none.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		tb.Fatal("CI=true but " + EnvDSN + " is not set: the PostgreSQL suites must run in CI" + howTo)
	}
	tb.Skip(howTo)
	return ""
}

// Schema is one fresh schema in the test database.
type Schema struct {
	DSN  string // the test database
	Name string // the schema; pass it to postgres.WithSchema
}

// NewSchema creates an empty, uniquely named schema and drops it (with
// everything in it) when tb ends, after the cleanups registered later, such
// as closing the stores opened on it.
func NewSchema(tb testing.TB) Schema {
	tb.Helper()
	dsn := DSN(tb)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	s := Schema{DSN: dsn, Name: "cairn_test_" + hex.EncodeToString(b[:])}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to %s: %v", EnvDSN, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{s.Name}.Sanitize()); err != nil {
		tb.Fatalf("create schema %s: %v", s.Name, err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schema %s: %v", s.Name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{s.Name}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", s.Name, err)
		}
	})
	return s
}

// Open opens a store on the schema (migrating it on first open) and closes
// it when tb ends. Several stores opened on one schema stand for several
// cairn replicas on one database.
func (s Schema) Open(tb testing.TB, opts ...postgres.Option) *postgres.Store {
	tb.Helper()
	opts = append([]postgres.Option{postgres.WithSchema(s.Name), postgres.WithMaxConns(4)}, opts...)
	st, err := postgres.Open(context.Background(), s.DSN, opts...)
	if err != nil {
		tb.Fatalf("open PostgreSQL store: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return st
}

// Exec runs SQL in the schema, for tests that set up what cairn would not.
func (s Schema) Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{s.Name}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// Open opens a store on a fresh schema.
func Open(tb testing.TB) *postgres.Store {
	tb.Helper()
	return NewSchema(tb).Open(tb)
}
