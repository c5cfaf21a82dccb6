package sqlite

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

var (
	_ store.Snapshotter = (*Store)(nil)
	_ store.RestoreTx   = (*tx)(nil)
)

// Snapshot runs fn in one read transaction on the reader pool: in WAL mode
// it sees the database as of its first read, however long it takes, and
// never blocks the writer.
func (s *Store) Snapshot(ctx context.Context, fn func(ctx context.Context, r store.Reader) error) error {
	return s.view(ctx, func(r reader) error { return fn(ctx, r) })
}

// clearTables lists every table of stored state, children first so that no
// foreign key is violated on the way.
var clearTables = []string{
	"uses", "instance_labels", "latest_attributes", "resource_versions", "instances",
	"type_parents", "types", "builtin_values", "builtin_locks", "changes", "intents",
}

func (t *tx) Clear(ctx context.Context) error {
	// The change log is emptied as pruning does, so the next change does
	// not reuse a Seq (nextSeq).
	if _, err := t.exec(ctx, `UPDATE changes_pruned SET through = `+lastSeq+` WHERE id = 1`); err != nil {
		return fmt.Errorf("sqlite: clear changes: %w", err)
	}
	for _, table := range clearTables {
		if _, err := t.exec(ctx, `DELETE FROM `+table); err != nil {
			return fmt.Errorf("sqlite: clear %s: %w", table, err)
		}
	}
	t.forgetRecorded()
	t.known.forget()
	return nil
}

func (t *tx) SetSeq(ctx context.Context, id string, seq int64) error {
	n, err := t.exec(ctx, `UPDATE instances SET seq = ? WHERE id = ?`, seq, id)
	if err != nil {
		return fmt.Errorf("sqlite: set the seq of %s: %w", id, err)
	}
	if n == 0 {
		return notFound(id)
	}
	return nil
}

// RestartChangeLog empties the change log and sets its pruned position,
// from which the next Seq follows (nextSeq).
func (t *tx) RestartChangeLog(ctx context.Context, through int64) error {
	t.known.forget()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM changes`, nil},
		{`UPDATE changes_pruned SET through = ? WHERE id = 1`, []any{through}},
	} {
		if _, err := t.exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("sqlite: restart the change log at %d: %w", through, err)
		}
	}
	return nil
}
