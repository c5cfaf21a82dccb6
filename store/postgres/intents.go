package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const intentColumns = `instance_id, resource_version, backend_id, op, context, created_at, attempts, last_error, next_attempt, owner_id`

func (r reader) Intents(ctx context.Context, due time.Time) ([]store.Intent, error) {
	rows, err := r.q.Query(ctx, `SELECT `+intentColumns+` FROM intents WHERE next_attempt <= $1 ORDER BY created_at, instance_id, resource_version`, due)
	if err != nil {
		return nil, fmt.Errorf("postgres: intents: %w", classify(err))
	}
	defer rows.Close()
	var out []store.Intent
	for rows.Next() {
		var (
			in       store.Intent
			op       string
			c        []byte
			at, next pgtype.Timestamptz
		)
		if err := rows.Scan(&in.InstanceID, &in.ResourceVersion, &in.BackendID, &op, &c, &at, &in.Attempts, &in.LastError, &next, &in.OwnerID); err != nil {
			return nil, fmt.Errorf("postgres: intents: %w", classify(err))
		}
		in.Op, in.Context, in.CreatedAt, in.NextAttempt = store.IntentOp(op), decodeRaw(c), decodeTime(at), decodeTime(next)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: intents: %w", classify(err))
	}
	return out, nil
}

func (s *Store) Intents(ctx context.Context, due time.Time) ([]store.Intent, error) {
	return s.rd().Intents(ctx, due)
}

func (t *tx) PutIntent(ctx context.Context, in store.Intent) error {
	c, err := encodeRaw("context", in.Context)
	if err != nil {
		return err
	}
	next := in.NextAttempt
	if next.IsZero() {
		next = in.CreatedAt
	}
	tag, err := t.q.Exec(ctx, `INSERT INTO intents (`+intentColumns+`) VALUES ($1, $2, $3, $4, $5::json, $6, 0, '', $7, $8) ON CONFLICT DO NOTHING`,
		in.InstanceID, in.ResourceVersion, in.BackendID, string(in.Op), c, in.CreatedAt, next, in.OwnerID)
	if err != nil {
		return fmt.Errorf("postgres: record intent %s/%d: %w", in.InstanceID, in.ResourceVersion, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "a write of instance %q resource version %d is already on its way (or being recovered)", in.InstanceID, in.ResourceVersion)
	}
	return nil
}

func (t *tx) DeleteIntent(ctx context.Context, instanceID string, rv int) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM intents WHERE instance_id = $1 AND resource_version = $2`, instanceID, rv); err != nil {
		return fmt.Errorf("postgres: forget intent %s/%d: %w", instanceID, rv, classify(err))
	}
	return nil
}

func (t *tx) RetryIntent(ctx context.Context, instanceID string, rv int, lastError string, next time.Time) error {
	tag, err := t.q.Exec(ctx, `UPDATE intents SET attempts = attempts + 1, last_error = $1, next_attempt = $2 WHERE instance_id = $3 AND resource_version = $4`,
		lastError, next, instanceID, rv)
	if err != nil {
		return fmt.Errorf("postgres: intent %s/%d: %w", instanceID, rv, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "no intent of instance %q resource version %d", instanceID, rv)
	}
	return nil
}
