package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func (r reader) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	var v sql.NullString
	err := r.queryRow(ctx, qValue, id, rv).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, cairn.Errorf(cairn.CodeNotFound, "value of instance %q resource version %d not found", id, rv)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: value %s/%d: %w", id, rv, err)
	}
	return decodeRaw(v), nil
}

func (r reader) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pairs := make([][2]any, len(keys))
	for i, k := range keys {
		pairs[i] = [2]any{k.InstanceID, k.ResourceVersion}
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		return nil, fmt.Errorf("sqlite: values: %w", err)
	}
	rows, err := r.query(ctx, qValues, string(arg))
	if err != nil {
		return nil, fmt.Errorf("sqlite: values: %w", err)
	}
	defer rows.Close()
	out := make([]json.RawMessage, len(keys))
	found := make([]bool, len(keys))
	for rows.Next() {
		var i int
		var v sql.NullString
		if err := rows.Scan(&i, &v); err != nil {
			return nil, fmt.Errorf("sqlite: values: %w", err)
		}
		out[i], found[i] = decodeRaw(v), true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: values: %w", err)
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
	if err := r.queryRow(ctx, qHasValues, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("sqlite: has values %s: %w", id, err)
	}
	return ok, nil
}

func (r reader) ValueLock(ctx context.Context, id string) (string, error) {
	var owner string
	err := r.queryRow(ctx, qValueLock, id).Scan(&owner)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlite: value lock %s: %w", id, err)
	}
	return owner, nil
}

func (t *tx) PutValue(ctx context.Context, id string, rv int, value json.RawMessage) error {
	v, err := encodeRaw("value", value)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, qPutValue, id, rv, v)
	if err != nil {
		return fmt.Errorf("sqlite: put value %s/%d: %w", id, rv, err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "value of instance %q resource version %d already exists", id, rv)
	}
	return nil
}

func (t *tx) DeleteValues(ctx context.Context, id string) error {
	n, err := t.exec(ctx, qDeleteValues, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete values %s: %w", id, err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "no values of instance %q", id)
	}
	return nil
}

func (t *tx) DeleteValue(ctx context.Context, id string, rv int) error {
	n, err := t.exec(ctx, qDeleteValue, id, rv)
	if err != nil {
		return fmt.Errorf("sqlite: delete value %s/%d: %w", id, rv, err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "value of instance %q resource version %d not found", id, rv)
	}
	return nil
}

func (t *tx) SetValueLock(ctx context.Context, id string, owner string) error {
	var err error
	if owner == "" {
		_, err = t.exec(ctx, qClearLock, id)
	} else {
		_, err = t.exec(ctx, qSetLock, id, owner)
	}
	if err != nil {
		return fmt.Errorf("sqlite: set value lock %s: %w", id, err)
	}
	return nil
}
