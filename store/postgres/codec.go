package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
)

// querier is what reads and writes run on: the pool (one statement per
// read, each with its own snapshot) or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// timestamptz covers 4713 BC to 294276 AD; Go times beyond are refused.
var (
	minTime = time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(294276, 1, 1, 0, 0, 0, 0, time.UTC)
)

// encodeTime passes t to a timestamptz column (microsecond precision); the
// zero time is NULL.
func encodeTime(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || !t.Before(maxTime) {
		return nil, cairn.Errorf(cairn.CodeInvalid, "timestamp %s is out of range (4713 BC to 294276 AD)", t.Format(time.RFC3339))
	}
	return t, nil
}

// decodeTime returns a timestamptz in UTC; NULL (and ±infinity, which cairn
// never writes) is the zero time.
func decodeTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid || t.InfinityModifier != pgtype.Finite {
		return time.Time{}
	}
	return t.Time.UTC()
}

// encodeRaw compacts and checks a JSON document; nil (or empty) is NULL, so
// "not given" and JSON null stay apart.
func encodeRaw(field string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s is not valid JSON: %w", field, err)
	}
	return b.Bytes(), nil
}

// decodeRaw returns a NULL column (nil) as nil.
func decodeRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// encodeJSON marshals v, storing NULL for an empty value.
func encodeJSON(field string, v any, empty bool) ([]byte, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s: %w", field, err)
	}
	return b, nil
}

// decodeJSON unmarshals a non-NULL column into v.
func decodeJSON(field string, b []byte, v any) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("postgres: decode %s: %w", field, err)
	}
	return nil
}

// args numbers query parameters as they are added: a.add(v) returns "$n".
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}
