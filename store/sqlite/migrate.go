package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrSchemaTooNew reports a database migrated by a newer cairn than this one.
var ErrSchemaTooNew = errors.New("database schema is newer than this cairn binary supports; upgrade cairn")

// migrations are the schema steps; migrations[i] takes the schema to version
// i+1. Append only: a released step is never edited.
var migrations = []string{
	// 1: initial schema. Timestamps are Unix nanoseconds (UTC); JSON columns
	// hold compact JSON or NULL for "not given".
	`
CREATE TABLE types (
	path            TEXT    NOT NULL,
	revision        TEXT    NOT NULL,
	revision_key    TEXT    NOT NULL,
	json_schema     TEXT,
	additional_refs TEXT,
	rest_group      TEXT    NOT NULL DEFAULT '',
	rest_version    TEXT    NOT NULL DEFAULT '',
	names           TEXT,
	created_at      INTEGER,
	PRIMARY KEY (path, revision)
);
CREATE INDEX types_rest ON types (rest_group, rest_version);

CREATE TABLE type_parents (
	path     TEXT NOT NULL,
	revision TEXT NOT NULL,
	parent   TEXT NOT NULL,
	PRIMARY KEY (path, revision, parent),
	FOREIGN KEY (path, revision) REFERENCES types (path, revision) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX type_parents_parent ON type_parents (parent);

CREATE TABLE instances (
	id                TEXT    NOT NULL PRIMARY KEY,
	type_path         TEXT    NOT NULL,
	type_revision     TEXT    NOT NULL,
	type_revision_key TEXT    NOT NULL,
	namespace         TEXT    NOT NULL,
	name              TEXT    NOT NULL,
	alias             TEXT    NOT NULL DEFAULT '',
	annotations       TEXT,
	backend_id        TEXT    NOT NULL DEFAULT '',
	backend_abstract  INTEGER NOT NULL DEFAULT 0,
	locked_by         TEXT    NOT NULL DEFAULT '',
	created_at        INTEGER,
	latest_rv         INTEGER NOT NULL,
	UNIQUE (type_path, namespace, name)
);
CREATE INDEX instances_order ON instances (type_path, type_revision_key DESC, type_revision DESC, created_at DESC, id);
CREATE INDEX instances_backend ON instances (backend_id);
CREATE INDEX instances_name ON instances (namespace, name);

CREATE TABLE instance_labels (
	instance_id TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	key         TEXT NOT NULL,
	value       TEXT NOT NULL,
	PRIMARY KEY (instance_id, key)
) WITHOUT ROWID;
CREATE INDEX instance_labels_key ON instance_labels (key, value);

CREATE TABLE resource_versions (
	instance_id      TEXT    NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	resource_version INTEGER NOT NULL,
	created_by       TEXT    NOT NULL DEFAULT '',
	created_at       INTEGER,
	attributes       TEXT,
	context          TEXT,
	PRIMARY KEY (instance_id, resource_version)
);

CREATE TABLE latest_attributes (
	instance_id TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	path        TEXT NOT NULL,
	revision    TEXT NOT NULL,
	PRIMARY KEY (instance_id, path, revision)
) WITHOUT ROWID;
CREATE INDEX latest_attributes_path ON latest_attributes (path, revision);

-- to_id has no ON DELETE action: deleting a used instance fails, the store
-- checks and reports CodeUsedBy before it gets there.
CREATE TABLE uses (
	from_id TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	to_id   TEXT NOT NULL REFERENCES instances (id),
	PRIMARY KEY (from_id, to_id)
) WITHOUT ROWID;
CREATE INDEX uses_to ON uses (to_id, from_id);

-- The built-in backend's own storage: no foreign keys, since the hub writes
-- values before the instance row exists and deletes them after it is gone.
CREATE TABLE builtin_values (
	instance_id      TEXT    NOT NULL,
	resource_version INTEGER NOT NULL,
	value            TEXT,
	PRIMARY KEY (instance_id, resource_version)
);

CREATE TABLE builtin_locks (
	instance_id TEXT NOT NULL PRIMARY KEY,
	locked_by   TEXT NOT NULL
) WITHOUT ROWID;
`,
	// 2: the change log (watch, replicas) and each instance's last change.
	`
ALTER TABLE instances ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;

-- AUTOINCREMENT: a Seq is never reused, even after the newest rows are
-- pruned, so a watcher's position stays meaningful.
CREATE TABLE changes (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	kind          TEXT    NOT NULL,
	instance_id   TEXT    NOT NULL,
	type_path     TEXT    NOT NULL,
	type_revision TEXT    NOT NULL,
	namespace     TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	at            INTEGER NOT NULL
);

-- One row: the Seq through which changes were pruned.
CREATE TABLE changes_pruned (
	id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	through INTEGER NOT NULL
);
INSERT INTO changes_pruned (id, through) VALUES (1, 0);
`,
	// 3: what an instance carries besides its versions: the status its
	// controllers write (not versioned, like the Kubernetes status
	// subresource) and the field ownership of server-side apply.
	`
ALTER TABLE instances ADD COLUMN status TEXT;
ALTER TABLE instances ADD COLUMN managed_fields TEXT;
`,
	// 4: the columns kubectl prints for a Type's instances
	// (additionalPrinterColumns).
	`
ALTER TABLE types ADD COLUMN printer_columns TEXT;
`,
	// 5: the intent journal: writes to external backends on their way
	// (store.Intent). One row per instance and resource version, so two
	// writers cannot both be on the way to the same version.
	`
CREATE TABLE intents (
	instance_id      TEXT    NOT NULL,
	resource_version INTEGER NOT NULL,
	backend_id       TEXT    NOT NULL,
	op               TEXT    NOT NULL,
	context          TEXT,
	created_at       INTEGER NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT    NOT NULL DEFAULT '',
	next_attempt     INTEGER NOT NULL,
	PRIMARY KEY (instance_id, resource_version)
);
CREATE INDEX intents_due ON intents (next_attempt);
`,
	// 6: deletes in the intent journal: the lock owner the backend's
	// delete is sent for, which recovery needs once the instance (and its
	// lock) is gone from the store.
	`
ALTER TABLE intents ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';
`,
	// 7: resource versions stored in their primary key's B-tree alone
	// (WITHOUT ROWID; the rows are small): a rowid table kept a second
	// B-tree for the key, so every create and update inserted into two
	// and wrote a page of each.
	`
CREATE TABLE resource_versions_7 (
	instance_id      TEXT    NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
	resource_version INTEGER NOT NULL,
	created_by       TEXT    NOT NULL DEFAULT '',
	created_at       INTEGER,
	attributes       TEXT,
	context          TEXT,
	PRIMARY KEY (instance_id, resource_version)
) WITHOUT ROWID;
INSERT INTO resource_versions_7 (instance_id, resource_version, created_by, created_at, attributes, context)
	SELECT instance_id, resource_version, created_by, created_at, attributes, context FROM resource_versions;
DROP TABLE resource_versions;
ALTER TABLE resource_versions_7 RENAME TO resource_versions;
`,
	// 8: two indexes no query reads. Every label and attribute condition
	// of a list is correlated with its instance (instanceWhere), so it
	// seeks its table's primary key, (instance_id, key) and (instance_id,
	// path, revision), once per instance either way; the indexes by key
	// and by path only cost every create and relabel a B-tree insert and
	// a page per commit.
	`
DROP INDEX instance_labels_key;
DROP INDEX latest_attributes_path;
`,
	// 9: the built-in backend's values stored in their primary key's
	// B-tree alone (WITHOUT ROWID), as migration 7 did for resource
	// versions: a rowid table kept a second B-tree for the key, so every
	// create and update of a built-in value inserted into two and wrote a
	// page of each. Every query of the table reads it by its key.
	`
CREATE TABLE builtin_values_9 (
	instance_id      TEXT    NOT NULL,
	resource_version INTEGER NOT NULL,
	value            TEXT,
	PRIMARY KEY (instance_id, resource_version)
) WITHOUT ROWID;
INSERT INTO builtin_values_9 (instance_id, resource_version, value)
	SELECT instance_id, resource_version, value FROM builtin_values;
DROP TABLE builtin_values;
ALTER TABLE builtin_values_9 RENAME TO builtin_values;
`,
	// 10: two B-trees fewer per create. An instance uses its backend
	// without a row of uses (instances.backend_id says it; see usesJSON),
	// so the rows that say it again go. And changes gives up
	// AUTOINCREMENT, whose counter in sqlite_sequence every logged change
	// updated: the next Seq is one past the largest kept and the pruned
	// position (nextSeq), so no Seq is reused, also after every change
	// was pruned. A counter past both (the log emptied by a restore's
	// Clear) becomes the pruned position first.
	`
DELETE FROM uses WHERE from_id <> to_id AND to_id = (SELECT backend_id FROM instances WHERE id = uses.from_id);
UPDATE changes_pruned SET through = (SELECT seq FROM sqlite_sequence WHERE name = 'changes')
WHERE id = 1 AND (SELECT seq FROM sqlite_sequence WHERE name = 'changes') > MAX(through, COALESCE((SELECT MAX(seq) FROM changes), 0));
CREATE TABLE changes_10 (
	seq           INTEGER PRIMARY KEY,
	kind          TEXT    NOT NULL,
	instance_id   TEXT    NOT NULL,
	type_path     TEXT    NOT NULL,
	type_revision TEXT    NOT NULL,
	namespace     TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	at            INTEGER NOT NULL
);
INSERT INTO changes_10 (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
	SELECT seq, kind, instance_id, type_path, type_revision, namespace, name, at FROM changes;
DROP TABLE changes;
ALTER TABLE changes_10 RENAME TO changes;
`,
}

// migrate brings the schema to len(migrations), one transaction per step.
// Each step rechecks the version under the write lock, so two processes
// opening the same new file do not both apply it.
func migrate(ctx context.Context, db *sql.DB) error {
	// In a transaction of its own (BEGIN IMMEDIATE on the writer), not as
	// a bare statement: a bare statement starts by reading and upgrades to
	// a write lock, and when another process created the table in between
	// SQLite answers SQLITE_BUSY at once, without the busy timeout; two
	// cairn processes starting on a new data directory met that.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", classify(err))
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	applied_at INTEGER NOT NULL
)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for {
		done, err := migrateStep(ctx, db)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateStep applies the next migration, reporting done when there is none.
func migrateStep(ctx context.Context, db *sql.DB) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", classify(err))
	}
	defer tx.Rollback()

	v, err := schemaVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	switch {
	case v > len(migrations):
		return false, fmt.Errorf("%w (database at version %d, binary knows up to %d)", ErrSchemaTooNew, v, len(migrations))
	case v == len(migrations):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrate: apply version %d: %w", v+1, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		v+1, time.Now().UnixNano()); err != nil {
		return false, fmt.Errorf("migrate: record version %d: %w", v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate: commit version %d: %w", v+1, err)
	}
	return false, nil
}

func schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate: read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// ErrNoStore reports a file opened WithoutMigrating that is not there or
// holds no cairn schema.
var ErrNoStore = errors.New("no cairn store there (cairn creates it on first use: check the path or --data-dir)")

// ErrSchemaTooOld reports a database opened WithoutMigrating that an older
// cairn migrated.
var ErrSchemaTooOld = errors.New("database schema is older than this cairn binary's; use the cairn that serves it, or run cairn migrate first")

// checkVersion refuses a database not at this binary's version, reading
// only.
func checkVersion(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("check the schema version: %w", classify(err))
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return fmt.Errorf("check the schema version: %w", classify(err))
	}
	if n == 0 {
		return ErrNoStore
	}
	v, err := schemaVersion(ctx, tx)
	switch {
	case err != nil:
		return err
	case v > len(migrations):
		return fmt.Errorf("%w (database at version %d, binary knows up to %d)", ErrSchemaTooNew, v, len(migrations))
	case v < len(migrations):
		return fmt.Errorf("%w (database at version %d, binary's %d)", ErrSchemaTooOld, v, len(migrations))
	}
	return nil
}

// SchemaVersion is the schema version this binary migrates a database to;
// after a successful Open the database is at exactly this version.
func SchemaVersion() int { return len(migrations) }
