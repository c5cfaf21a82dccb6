package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func (r reader) Changes(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	var pruned int64
	if err := r.queryRow(ctx, qPrunedThrough).Scan(&pruned); err != nil {
		return nil, fmt.Errorf("sqlite: changes: %w", err)
	}
	if after < pruned {
		return nil, cairn.Errorf(cairn.CodeGone, "changes after %d are no longer kept (the change log starts after %d)", after, pruned)
	}
	if limit <= 0 {
		limit = 1000
	}
	rows, err := r.query(ctx, qChanges, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: changes: %w", err)
	}
	defer rows.Close()
	var out []store.Change
	for rows.Next() {
		var (
			c    store.Change
			kind string
			at   sql.NullInt64
		)
		if err := rows.Scan(&c.Seq, &kind, &c.InstanceID, &c.TypeRef.Path, &c.TypeRef.Revision, &c.Namespace, &c.Name, &at); err != nil {
			return nil, fmt.Errorf("sqlite: changes: %w", err)
		}
		c.Kind = store.ChangeKind(kind)
		c.At = decodeTime(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: changes: %w", err)
	}
	return out, nil
}

// LastSeq through a write transaction that logged a change is that
// change's Seq (txKnown), without a query.
func (r reader) LastSeq(ctx context.Context) (int64, error) {
	if r.known != nil && r.known.lastSeq > 0 {
		return r.known.lastSeq, nil
	}
	var seq int64
	if err := r.queryRow(ctx, qLastSeq).Scan(&seq); err != nil {
		return 0, fmt.Errorf("sqlite: last change: %w", err)
	}
	return seq, nil
}

func (s *Store) Changes(ctx context.Context, after int64, limit int) (out []store.Change, err error) {
	err = s.view(ctx, func(r reader) error { out, err = r.Changes(ctx, after, limit); return err })
	return out, err
}

// LastSeq reads the newest change's position; while no transaction has
// committed since the last read (the WAL-index header says so), it answers
// that read's position without a query (position.go).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	return s.position.lastSeq(ctx, s.pool().LastSeq)
}
