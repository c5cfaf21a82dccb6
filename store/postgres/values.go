package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const (
	qValue  = `SELECT value FROM builtin_values WHERE instance_id = $1 AND resource_version = $2`
	qValues = `SELECT k.ord, v.value FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS k(id, rv, ord)
JOIN builtin_values v ON v.instance_id = k.id AND v.resource_version = k.rv`
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

func (r reader) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ids := make([]string, len(keys))
	rvs := make([]int32, len(keys))
	for i, k := range keys {
		ids[i], rvs[i] = k.InstanceID, int32(k.ResourceVersion)
	}
	rows, err := r.q.Query(ctx, qValues, ids, rvs)
	if err != nil {
		return nil, fmt.Errorf("postgres: values: %w", classify(err))
	}
	defer rows.Close()
	out := make([]json.RawMessage, len(keys))
	found := make([]bool, len(keys))
	for rows.Next() {
		var ord int64
		var v []byte
		if err := rows.Scan(&ord, &v); err != nil {
			return nil, fmt.Errorf("postgres: values: %w", classify(err))
		}
		out[ord-1], found[ord-1] = decodeRaw(v), true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: values: %w", classify(err))
	}
	for i, ok := range found {
		if !ok {
			return nil, cairn.Errorf(cairn.CodeNotFound, "value of instance %q resource version %d not found", keys[i].InstanceID, keys[i].ResourceVersion)
		}
	}
	return out, nil
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
