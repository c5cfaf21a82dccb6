package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
)

var (
	_ store.Snapshotter = (*Store)(nil)
	_ store.RestoreTx   = (*tx)(nil)
)

// Snapshot runs fn in one REPEATABLE READ, READ ONLY transaction: every
// statement sees the snapshot taken at the first one, without locks, so
// writers go on while a backup reads.
func (s *Store) Snapshot(ctx context.Context, fn func(ctx context.Context, r store.Reader) error) error {
	pgTx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: begin snapshot: %w", classify(err))
	}
	defer pgTx.Rollback(context.WithoutCancel(ctx))
	if err := fn(ctx, reader{q: pgTx}); err != nil {
		return err
	}
	if err := pgTx.Commit(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("postgres: end snapshot: %w", classify(err))
	}
	return nil
}

// clearTables lists every table of stored state, children first so that no
// foreign key is violated on the way.
var clearTables = []string{
	"uses", "instance_labels", "latest_attributes", "resource_versions", "instances",
	"type_parents", "types", "builtin_values", "builtin_locks", "changes", "intents",
}

func (t *tx) Clear(ctx context.Context) error {
	for _, table := range clearTables {
		if _, err := t.q.Exec(ctx, `DELETE FROM `+table); err != nil {
			return fmt.Errorf("postgres: clear %s: %w", table, classify(err))
		}
	}
	t.recorded = nil
	return nil
}

func (t *tx) SetSeq(ctx context.Context, id string, seq int64) error {
	tag, err := t.q.Exec(ctx, `UPDATE instances SET seq = $1 WHERE id = $2`, seq, id)
	if err != nil {
		return fmt.Errorf("postgres: set the seq of %s: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// RestartChangeLog holds the change-log lock, so no concurrent writer takes
// a Seq in between. setval is not transactional: a rolled-back restore
// leaves the sequence higher, which only skips Seqs, never reuses one, as
// long as through is not below the sequence (the caller restarts beyond the
// store's LastSeq).
func (t *tx) RestartChangeLog(ctx context.Context, through int64) error {
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELECT id FROM change_log_lock WHERE id = 1 FOR UPDATE`, nil},
		{`DELETE FROM changes`, nil},
		{`SELECT setval('changes_seq', GREATEST($1::bigint, 1))`, []any{through}},
		{`UPDATE changes_pruned SET through = $1 WHERE id = 1`, []any{through}},
	} {
		if _, err := t.q.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("postgres: restart the change log at %d: %w", through, classify(err))
		}
	}
	return nil
}
