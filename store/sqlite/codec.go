package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/cairn-dev/cairn"
)

// Unix nanoseconds cover 1677-09-21 to 2262-04-11.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encodeTime stores t as Unix nanoseconds; the zero time is NULL.
func encodeTime(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, cairn.Errorf(cairn.CodeInvalid, "timestamp %s is out of range (1678-2262)", t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

func decodeTime(ns sql.NullInt64) time.Time {
	if !ns.Valid {
		return time.Time{}
	}
	return time.Unix(0, ns.Int64).UTC()
}

// encodeRaw compacts a JSON document; nil (or empty) is NULL, so "not given"
// and JSON null stay apart.
func encodeRaw(field string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s is not valid JSON: %w", field, err)
	}
	return b.String(), nil
}

// decodeRaw returns a NULL column as nil.
func decodeRaw(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// encodeJSON marshals v, storing NULL for an empty value.
func encodeJSON(field string, v any, empty bool) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s: %w", field, err)
	}
	return string(b), nil
}

// decodeJSON unmarshals a non-NULL column into v.
func decodeJSON(field string, s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return fmt.Errorf("sqlite: decode %s: %w", field, err)
	}
	return nil
}

// idList passes a list of ids as one JSON array parameter, read back with
// json_each, so a query takes any number of ids without a variable limit.
func idList(ids []string) string {
	b, _ := json.Marshal(ids) // []string always marshals
	return string(b)
}
