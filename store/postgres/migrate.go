package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooNew reports a database migrated by a newer cairn than this
// one; errors.Is matches the *SchemaTooNewError Open returns.
var ErrSchemaTooNew = errors.New("database schema is newer than this cairn binary supports")

// SchemaTooNewError says which versions disagree.
type SchemaTooNewError struct {
	Version   int // the database's
	Supported int // the newest this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this cairn binary supports (%d); upgrade cairn", e.Version, e.Supported)
}

func (e *SchemaTooNewError) Is(target error) bool { return target == ErrSchemaTooNew }

// ErrNoSchema reports a schema without cairn's tables, opened
// WithoutMigrating.
var ErrNoSchema = errors.New("the schema holds no cairn tables (cairn migrate or cairn serve creates them)")

// ErrSchemaTooOld reports a schema opened WithoutMigrating that an older
// cairn migrated; errors.Is matches the *SchemaTooOldError Open returns.
var ErrSchemaTooOld = errors.New("database schema is older than this cairn binary's")

// SchemaTooOldError says which versions disagree.
type SchemaTooOldError struct {
	Version int // the database's
	Binary  int // this binary's
}

func (e *SchemaTooOldError) Error() string {
	return fmt.Sprintf("database schema version %d is older than this cairn binary's (%d); use the cairn that serves it, or run cairn migrate first", e.Version, e.Binary)
}

func (e *SchemaTooOldError) Is(target error) bool { return target == ErrSchemaTooOld }

// checkVersion refuses a schema not at this binary's version, reading only.
func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	var schema *string
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT current_schema(), to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL`).Scan(&schema, &exists); err != nil {
		return fmt.Errorf("find schema_migrations: %w", classify(err))
	}
	if schema == nil || !exists {
		return ErrNoSchema
	}
	v, err := readVersion(ctx, pool)
	switch {
	case err != nil:
		return err
	case v > len(migrations):
		return &SchemaTooNewError{Version: v, Supported: len(migrations)}
	case v < len(migrations):
		return &SchemaTooOldError{Version: v, Binary: len(migrations)}
	}
	return nil
}

// SchemaVersion is the schema version this binary migrates a database to.
func SchemaVersion() int { return len(migrations) }

// migrations are the schema steps; migrations[i] takes the schema to version
// i+1. Append only: a released step is never edited.
//
// Text columns that are compared or sorted use the "C" collation, so order
// and prefix ranges are by bytes as in SQLite, whatever the database's
// locale. JSON documents are json, not jsonb: kept as the compact text the
// store writes (key order included, and \u0000 is allowed), NULL for "not
// given" and 'null' for JSON null.
var migrations = []string{
	// 1: the schema of store/sqlite versions 1 and 2, in PostgreSQL types.
	`
CREATE TABLE types (
	path            text COLLATE "C" NOT NULL,
	revision        text COLLATE "C" NOT NULL,
	revision_key    text COLLATE "C" NOT NULL,
	json_schema     json,
	additional_refs text[],
	rest_group      text COLLATE "C" NOT NULL DEFAULT '',
	rest_version    text COLLATE "C" NOT NULL DEFAULT '',
	names           json,
	created_at      timestamptz,
	PRIMARY KEY (path, revision)
);
CREATE INDEX types_order ON types (path, revision_key DESC, revision DESC);
CREATE INDEX types_rest ON types (rest_group, rest_version);

CREATE TABLE type_parents (
	path     text COLLATE "C" NOT NULL,
	revision text COLLATE "C" NOT NULL,
	parent   text COLLATE "C" NOT NULL,
	PRIMARY KEY (path, revision, parent),
	FOREIGN KEY (path, revision) REFERENCES types (path, revision) ON DELETE CASCADE
);
CREATE INDEX type_parents_parent ON type_parents (parent);

CREATE TABLE instances (
	id                text COLLATE "C" NOT NULL PRIMARY KEY,
	type_path         text COLLATE "C" NOT NULL,
	type_revision     text COLLATE "C" NOT NULL,
	type_revision_key text COLLATE "C" NOT NULL,
	namespace         text COLLATE "C" NOT NULL,
	name              text COLLATE "C" NOT NULL,
	alias             text NOT NULL DEFAULT '',
	annotations       json,
	backend_id        text COLLATE "C" NOT NULL DEFAULT '',
	backend_abstract  boolean NOT NULL DEFAULT false,
	locked_by         text NOT NULL DEFAULT '',
	created_at        timestamptz,
	latest_rv         integer NOT NULL,
	-- the Seq of the instance's last change (see changes)
	seq               bigint NOT NULL DEFAULT 0,
	CONSTRAINT instances_name_key UNIQUE (type_path, namespace, name)
);
-- The list order; a NULL createdAt sorts as the oldest, as in SQLite.
CREATE INDEX instances_order ON instances (type_path, type_revision_key DESC, type_revision DESC,
	(COALESCE(created_at, '-infinity')) DESC, id);
CREATE INDEX instances_backend ON instances (backend_id);
CREATE INDEX instances_name ON instances (namespace, name);

CREATE TABLE instance_labels (
	instance_id text COLLATE "C" NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	key         text COLLATE "C" NOT NULL,
	value       text COLLATE "C" NOT NULL,
	PRIMARY KEY (instance_id, key)
);
CREATE INDEX instance_labels_key ON instance_labels (key, value);

CREATE TABLE resource_versions (
	instance_id      text COLLATE "C" NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	resource_version integer NOT NULL,
	created_by       text COLLATE "C" NOT NULL DEFAULT '',
	created_at       timestamptz,
	attributes       json,
	context          json,
	PRIMARY KEY (instance_id, resource_version)
);

CREATE TABLE latest_attributes (
	instance_id text COLLATE "C" NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	path        text COLLATE "C" NOT NULL,
	revision    text COLLATE "C" NOT NULL,
	PRIMARY KEY (instance_id, path, revision)
);
CREATE INDEX latest_attributes_path ON latest_attributes (path, revision);

-- to_id has no ON DELETE action: deleting a used instance fails; the store
-- checks and reports CodeUsedBy before it gets there.
CREATE TABLE uses (
	from_id text COLLATE "C" NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	to_id   text COLLATE "C" NOT NULL REFERENCES instances (id),
	PRIMARY KEY (from_id, to_id)
);
CREATE INDEX uses_to ON uses (to_id, from_id);

-- The built-in backend's own storage: no foreign keys, since the hub writes
-- values before the instance row exists and deletes them after it is gone.
CREATE TABLE builtin_values (
	instance_id      text COLLATE "C" NOT NULL,
	resource_version integer NOT NULL,
	value            json,
	PRIMARY KEY (instance_id, resource_version)
);

CREATE TABLE builtin_locks (
	instance_id text COLLATE "C" NOT NULL PRIMARY KEY,
	locked_by   text NOT NULL
);

-- The change log. Seqs come from changes_seq, and only while the
-- transaction holds the row lock of change_log_lock (see the package
-- documentation), so they follow commit order; a sequence never hands out a
-- value twice, so Seqs are not reused after pruning.
CREATE SEQUENCE changes_seq;
CREATE TABLE changes (
	seq           bigint NOT NULL PRIMARY KEY,
	kind          text NOT NULL,
	instance_id   text COLLATE "C" NOT NULL,
	type_path     text COLLATE "C" NOT NULL,
	type_revision text COLLATE "C" NOT NULL,
	namespace     text COLLATE "C" NOT NULL,
	name          text COLLATE "C" NOT NULL,
	at            timestamptz NOT NULL
);

-- One row, whose lock change-log writers hold from their first change to
-- their commit.
CREATE TABLE change_log_lock (
	id integer NOT NULL PRIMARY KEY CHECK (id = 1)
);
INSERT INTO change_log_lock (id) VALUES (1);

-- One row: the Seq through which changes were pruned.
CREATE TABLE changes_pruned (
	id      integer NOT NULL PRIMARY KEY CHECK (id = 1),
	through bigint NOT NULL
);
INSERT INTO changes_pruned (id, through) VALUES (1, 0);
`,
	// 2: store/sqlite version 3: an instance's status and the field
	// ownership of server-side apply.
	`
ALTER TABLE instances ADD COLUMN status json;
ALTER TABLE instances ADD COLUMN managed_fields json;
`,
	// 3: store/sqlite version 4: the columns kubectl prints for a Type's
	// instances (additionalPrinterColumns).
	`
ALTER TABLE types ADD COLUMN printer_columns json;
`,
	// 4: store/sqlite version 5: the intent journal (store.Intent).
	`
CREATE TABLE intents (
	instance_id      text COLLATE "C" NOT NULL,
	resource_version integer NOT NULL,
	backend_id       text COLLATE "C" NOT NULL,
	op               text NOT NULL,
	context          json,
	created_at       timestamptz NOT NULL,
	attempts         integer NOT NULL DEFAULT 0,
	last_error       text NOT NULL DEFAULT '',
	next_attempt     timestamptz NOT NULL,
	PRIMARY KEY (instance_id, resource_version)
);
CREATE INDEX intents_due ON intents (next_attempt);
`,
	// 5: store/sqlite version 6: the lock owner of a journaled delete.
	`
ALTER TABLE intents ADD COLUMN owner_id text NOT NULL DEFAULT '';
`,
	// 6: store/sqlite version 10's uses: an instance uses its backend
	// without a row of uses (instances.backend_id says it), so the rows
	// that say it again go.
	`
DELETE FROM uses u USING instances i WHERE i.id = u.from_id AND u.to_id = i.backend_id AND u.from_id <> u.to_id;
`,
}

// migrationLockKey is the advisory lock migrations take: a hash of the
// schema's name, so that stores in different schemas of one database do not
// wait for each other.
const migrationLockKey = `hashtextextended('cairn.migrate:' || current_schema(), 0)`

// migrate brings the schema to len(migrations), one transaction per step.
// Each step takes a transaction-level advisory lock first and reads the
// version under it, so replicas starting together apply every step once;
// the lock also covers creating schema_migrations, whose concurrent CREATE
// TABLE IF NOT EXISTS would otherwise race.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	for {
		done, err := migrateStep(ctx, pool, log)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateStep applies the next migration, reporting done when there is none.
func migrateStep(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (done bool, err error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", classify(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	var schema *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return false, fmt.Errorf("migrate: %w", classify(err))
	}
	if schema == nil {
		return false, errors.New("migrate: no schema to create the tables in: the search_path names no existing schema (create it, or fix search_path in the connection URL)")
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+migrationLockKey+`)`); err != nil {
		return false, fmt.Errorf("migrate: take the migration lock: %w", classify(err))
	}
	// CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when the
	// table is there, which a role that only reads and writes cairn's
	// tables lacks: a schema already migrated is found without it.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return false, fmt.Errorf("migrate: find schema_migrations: %w", classify(err))
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer NOT NULL PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return false, fmt.Errorf("migrate: create schema_migrations: %w", noCreate(err, *schema))
		}
	}
	v, err := readVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	switch {
	case v > len(migrations):
		return false, &SchemaTooNewError{Version: v, Supported: len(migrations)}
	case v == len(migrations):
		return true, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrate: apply version %d: %w", v+1, noCreate(err, *schema))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v+1); err != nil {
		return false, fmt.Errorf("migrate: record version %d: %w", v+1, classify(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migrate: commit version %d: %w", v+1, classify(err))
	}
	log.InfoContext(ctx, "migrated the PostgreSQL schema", "schema", *schema, "version", v+1)
	return false, nil
}

// noCreate classifies err, and says what to do when it is PostgreSQL's
// insufficient_privilege: a role that serves may lack the right to change
// the schema, which only a migration needs.
func noCreate(err error, schema string) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		return classify(err)
	}
	return fmt.Errorf("%w: the schema needs migrating, and this role may not change schema %q (CREATE on it, owning cairn's tables): "+
		"run cairn migrate as the schema's owner, then start cairn with this role", err, schema)
}

func readVersion(ctx context.Context, q querier) (int, error) {
	var v *int
	if err := q.QueryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate: read the schema version: %w", classify(err))
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// Version returns the database's schema version.
func (s *Store) Version(ctx context.Context) (int, error) {
	return readVersion(ctx, s.pool)
}
