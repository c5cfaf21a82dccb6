package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
)

const (
	qValue        = `SELECT value FROM builtin_values WHERE instance_id = $1 AND resource_version = $2`
	qHasValues    = `SELECT EXISTS (SELECT 1 FROM builtin_values WHERE instance_id = $1)`
	qValueLock    = `SELECT locked_by FROM builtin_locks WHERE instance_id = $1`
	qPutValue     = `INSERT INTO builtin_values (instance_id, resource_version, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	qDeleteValues = `DELETE FROM builtin_values WHERE instance_id = $1`
	qDeleteValue  = `DELETE FROM builtin_values WHERE instance_id = $1 AND resource_version = $2`
	qClearLock    = `DELETE FROM builtin_locks WHERE instance_id = $1`
	qSetLock      = `INSERT INTO builtin_locks (instance_id, locked_by) VALUES ($1, $2)
ON CONFLICT (instance_id) DO UPDATE SET locked_by = excluded.locked_by`
)

func (r reader) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	var v []byte
	err := r.q.QueryRow(ctx, qValue, id, rv).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, cairn.Errorf(cairn.CodeNotFound, "value of instance %q resource version %d not found", id, rv)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: value %s/%d: %w", id, rv, classify(err))
	}
	return decodeRaw(v), nil
}

func (r reader) HasValues(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := r.q.QueryRow(ctx, qHasValues, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("postgres: has values %s: %w", id, classify(err))
	}
	return ok, nil
}

func (r reader) ValueLock(ctx context.Context, id string) (string, error) {
	var owner string
	err := r.q.QueryRow(ctx, qValueLock, id).Scan(&owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("postgres: value lock %s: %w", id, classify(err))
	}
	return owner, nil
}

func (t *tx) PutValue(ctx context.Context, id string, rv int, value json.RawMessage) error {
	v, err := encodeRaw("value", value)
	if err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, qPutValue, id, rv, v)
	if err != nil {
		return fmt.Errorf("postgres: put value %s/%d: %w", id, rv, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "value of instance %q resource version %d already exists", id, rv)
	}
	return nil
}

func (t *tx) DeleteValues(ctx context.Context, id string) error {
	tag, err := t.q.Exec(ctx, qDeleteValues, id)
	if err != nil {
		return fmt.Errorf("postgres: delete values %s: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "no values of instance %q", id)
	}
	return nil
}

func (t *tx) DeleteValue(ctx context.Context, id string, rv int) error {
	tag, err := t.q.Exec(ctx, qDeleteValue, id, rv)
	if err != nil {
		return fmt.Errorf("postgres: delete value %s/%d: %w", id, rv, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "value of instance %q resource version %d not found", id, rv)
	}
	return nil
}

func (t *tx) SetValueLock(ctx context.Context, id string, owner string) error {
	var err error
	if owner == "" {
		_, err = t.q.Exec(ctx, qClearLock, id)
	} else {
		_, err = t.q.Exec(ctx, qSetLock, id, owner)
	}
	if err != nil {
		return fmt.Errorf("postgres: set value lock %s: %w", id, classify(err))
	}
	return nil
}
