package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const (
	typeColumns = `path, revision, json_schema, additional_refs, rest_group, rest_version, names, printer_columns, created_at`
	typeOrder   = ` ORDER BY path, revision_key DESC, revision DESC`

	qGetType = `SELECT ` + typeColumns + ` FROM types WHERE path = $1 AND revision = $2`
	// qCreateType inserts a Type and its parents in one statement; it
	// returns 0 when the revision exists.
	qCreateType = `WITH t AS (
	INSERT INTO types (path, revision, revision_key, json_schema, additional_refs, rest_group, rest_version, names, printer_columns, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, $9) ON CONFLICT DO NOTHING RETURNING path, revision
), p AS (
	INSERT INTO type_parents (path, revision, parent)
	SELECT t.path, t.revision, x.parent FROM t, unnest($5::text[]) AS x(parent) ON CONFLICT DO NOTHING
)
SELECT count(*) FROM t`
	// qGetTypeLocked is GetType through a Tx: the key-share lock keeps a
	// concurrent DeleteType waiting until this transaction ends, so a Type
	// read while creating its instances cannot vanish before they commit.
	qGetTypeLocked = qGetType + ` FOR KEY SHARE`
	// qTypeMatches checks a Type revision against a kept schema (json
	// keeps its input text, so the text is compared) and whether it has
	// names, taking the key-share lock of qGetTypeLocked on it.
	qTypeMatches = `SELECT EXISTS (SELECT 1 FROM types WHERE path = $1 AND revision = $2
AND json_schema::text IS NOT DISTINCT FROM $3::text AND (names IS NOT NULL) = $4 FOR KEY SHARE)`
	// qLockTypeForDelete waits for every transaction that read the Type
	// through GetType (key share) to end.
	qLockTypeForDelete = `SELECT 1 FROM types WHERE path = $1 AND revision = $2 FOR UPDATE`
	qDeleteType        = `DELETE FROM types WHERE path = $1 AND revision = $2`
)

func scanType(row pgx.Row) (cairn.Type, error) {
	var (
		t             cairn.Type
		schema, names []byte
		columns       []byte
		createdAt     pgtype.Timestamptz
	)
	if err := row.Scan(&t.Path, &t.Revision, &schema, &t.AdditionalRefs, &t.Group, &t.Version, &names, &columns, &createdAt); err != nil {
		return cairn.Type{}, err
	}
	t.JSONSchema = decodeRaw(schema)
	t.CreatedAt = decodeTime(createdAt)
	if len(t.AdditionalRefs) == 0 {
		t.AdditionalRefs = nil
	}
	if names != nil {
		t.Names = new(cairn.Names)
		if err := decodeJSON("names", names, t.Names); err != nil {
			return cairn.Type{}, err
		}
	}
	if columns != nil {
		if err := decodeJSON("additionalPrinterColumns", columns, &t.PrinterColumns); err != nil {
			return cairn.Type{}, err
		}
	}
	return t, nil
}

func (r reader) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	t, err := scanType(r.q.QueryRow(ctx, qGetType, ref.Path, ref.Revision))
	if errors.Is(err, pgx.ErrNoRows) {
		return cairn.Type{}, cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	if err != nil {
		return cairn.Type{}, fmt.Errorf("postgres: get type %s: %w", ref, classify(err))
	}
	return t, nil
}

func (r reader) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	var (
		where []string
		a     args
	)
	if p := strings.TrimSuffix(f.PathPrefix, ".*"); p != "" {
		// path = p or path starts with "p.": the half-open range ["p.",
		// "p/") in byte order ('/' follows '.'), which the index serves.
		where = append(where, `(path = `+a.add(p)+` OR (path >= `+a.add(p+".")+` AND path < `+a.add(p+"/")+`))`)
	}
	if f.Parent != "" {
		where = append(where, `EXISTS (SELECT 1 FROM type_parents p WHERE p.path = types.path AND p.revision = types.revision AND p.parent = `+a.add(f.Parent)+`)`)
	}
	if f.Group != "" {
		where = append(where, `rest_group = `+a.add(f.Group))
	}
	if f.Version != "" {
		where = append(where, `rest_version = `+a.add(f.Version))
	}
	q := `SELECT ` + typeColumns + ` FROM types`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += typeOrder

	rows, err := r.q.Query(ctx, q, a...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list types: %w", classify(err))
	}
	defer rows.Close()
	var out []cairn.Type
	for rows.Next() {
		t, err := scanType(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list types: %w", classify(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list types: %w", classify(err))
	}
	return out, nil
}

func (t *tx) CreateType(ctx context.Context, typ cairn.Type) error {
	schema, err := encodeRaw("jsonSchema", typ.JSONSchema)
	if err != nil {
		return err
	}
	names, err := encodeJSON("names", typ.Names, typ.Names == nil)
	if err != nil {
		return err
	}
	columns, err := encodeJSON("additionalPrinterColumns", typ.PrinterColumns, len(typ.PrinterColumns) == 0)
	if err != nil {
		return err
	}
	createdAt, err := encodeTime(typ.CreatedAt)
	if err != nil {
		return err
	}
	var refs []string
	if len(typ.AdditionalRefs) > 0 {
		refs = typ.AdditionalRefs
	}
	var n int
	err = t.q.QueryRow(ctx, qCreateType,
		typ.Path, typ.Revision, store.RevisionKey(typ.Revision), schema, refs, typ.Group, typ.Version, names, createdAt, columns).Scan(&n)
	if err != nil {
		return fmt.Errorf("postgres: create type %s: %w", typ.Ref(), classify(err))
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "type %q already exists", typ.Ref())
	}
	return nil
}

// GetType through a Tx locks the Type revision against DeleteType until the
// transaction ends.
func (t *tx) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	typ, err := scanType(t.q.QueryRow(ctx, qGetTypeLocked, ref.Path, ref.Revision))
	if errors.Is(err, pgx.ErrNoRows) {
		return cairn.Type{}, cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	if err != nil {
		return cairn.Type{}, fmt.Errorf("postgres: get type %s: %w", ref, classify(err))
	}
	return typ, nil
}

// TypeMatches checks Type ref against a schema and whether it has names
// (store.TypeMatcher). Like GetType through a Tx, it locks a revision that
// matches against DeleteType until the transaction ends.
func (t *tx) TypeMatches(ctx context.Context, ref cairn.TypeRef, jsonSchema json.RawMessage, named bool) (bool, error) {
	var doc *string // NULL for no schema
	if jsonSchema != nil {
		d := string(jsonSchema)
		doc = &d
	}
	var ok bool
	if err := t.q.QueryRow(ctx, qTypeMatches, ref.Path, ref.Revision, doc, named).Scan(&ok); err != nil {
		return false, fmt.Errorf("postgres: get type %s: %w", ref, classify(err))
	}
	return ok, nil
}

// DeleteType refuses a Type revision that has instances, counting them only
// once no transaction can still be adding one: it first waits for those that
// read the Type through a Tx (the row lock), then for every transaction with
// an uncommitted instance (they all hold the change-log lock, see
// qCreateInstance). Under READ COMMITTED the count, a new statement, then
// sees all of them.
func (t *tx) DeleteType(ctx context.Context, ref cairn.TypeRef) error {
	var one int
	err := t.q.QueryRow(ctx, qLockTypeForDelete, ref.Path, ref.Revision).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	if err != nil {
		return fmt.Errorf("postgres: delete type %s: lock: %w", ref, classify(err))
	}
	if _, err := t.q.Exec(ctx, `SELECT id FROM change_log_lock WHERE id = 1 FOR UPDATE`); err != nil {
		return fmt.Errorf("postgres: delete type %s: lock the change log: %w", ref, classify(err))
	}
	n, err := t.CountInstances(ctx, ref)
	if err != nil {
		return fmt.Errorf("postgres: delete type %s: %w", ref, err)
	}
	if n > 0 {
		return cairn.Errorf(cairn.CodeUsedBy, "type %q has %d instance(s)", ref, n)
	}
	tag, err := t.q.Exec(ctx, qDeleteType, ref.Path, ref.Revision)
	if err != nil {
		return fmt.Errorf("postgres: delete type %s: %w", ref, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	return nil
}
