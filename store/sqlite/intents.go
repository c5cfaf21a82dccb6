package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const intentColumns = `instance_id, resource_version, backend_id, op, context, created_at, attempts, last_error, next_attempt, owner_id`

func (r reader) Intents(ctx context.Context, due time.Time) ([]store.Intent, error) {
	rows, err := r.query(ctx, `SELECT `+intentColumns+` FROM intents WHERE next_attempt <= ? ORDER BY created_at, instance_id, resource_version`, due.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("sqlite: intents: %w", err)
	}
	defer rows.Close()
	var out []store.Intent
	for rows.Next() {
		var (
			in       store.Intent
			op       string
			c        sql.NullString
			at, next sql.NullInt64
		)
		if err := rows.Scan(&in.InstanceID, &in.ResourceVersion, &in.BackendID, &op, &c, &at, &in.Attempts, &in.LastError, &next, &in.OwnerID); err != nil {
			return nil, fmt.Errorf("sqlite: intents: %w", err)
		}
		in.Op, in.Context, in.CreatedAt, in.NextAttempt = store.IntentOp(op), decodeRaw(c), decodeTime(at), decodeTime(next)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: intents: %w", err)
	}
	return out, nil
}

func (s *Store) Intents(ctx context.Context, due time.Time) ([]store.Intent, error) {
	return s.pool().Intents(ctx, due)
}

func (t *tx) PutIntent(ctx context.Context, in store.Intent) error {
	c, err := encodeRaw("context", in.Context)
	if err != nil {
		return err
	}
	at, next := in.CreatedAt, in.NextAttempt
	if next.IsZero() {
		next = at
	}
	n, err := t.exec(ctx, `INSERT INTO intents (`+intentColumns+`) VALUES (?, ?, ?, ?, ?, ?, 0, '', ?, ?) ON CONFLICT DO NOTHING`,
		in.InstanceID, in.ResourceVersion, in.BackendID, string(in.Op), c, at.UnixNano(), next.UnixNano(), in.OwnerID)
	if err != nil {
		return fmt.Errorf("sqlite: record intent %s/%d: %w", in.InstanceID, in.ResourceVersion, err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "a write of instance %q resource version %d is already on its way (or being recovered)", in.InstanceID, in.ResourceVersion)
	}
	return nil
}

func (t *tx) DeleteIntent(ctx context.Context, instanceID string, rv int) error {
	if _, err := t.exec(ctx, `DELETE FROM intents WHERE instance_id = ? AND resource_version = ?`, instanceID, rv); err != nil {
		return fmt.Errorf("sqlite: forget intent %s/%d: %w", instanceID, rv, err)
	}
	return nil
}

func (t *tx) RetryIntent(ctx context.Context, instanceID string, rv int, lastError string, next time.Time) error {
	n, err := t.exec(ctx, `UPDATE intents SET attempts = attempts + 1, last_error = ?, next_attempt = ? WHERE instance_id = ? AND resource_version = ?`,
		lastError, next.UnixNano(), instanceID, rv)
	if err != nil {
		return fmt.Errorf("sqlite: intent %s/%d: %w", instanceID, rv, err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "no intent of instance %q resource version %d", instanceID, rv)
	}
	return nil
}
