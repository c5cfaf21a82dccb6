package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// typeRow is a Type's row as stored.
type typeRow struct {
	path, revision, group, version string
	schema, refs, names, columns   sql.NullString
	createdAt                      sql.NullInt64
}

func scanTypeRow(sc interface{ Scan(...any) error }) (typeRow, error) {
	var w typeRow
	err := sc.Scan(&w.path, &w.revision, &w.schema, &w.refs, &w.group, &w.version, &w.names, &w.columns, &w.createdAt)
	return w, err
}

func scanType(sc interface{ Scan(...any) error }) (cairn.Type, error) {
	w, err := scanTypeRow(sc)
	if err != nil {
		return cairn.Type{}, err
	}
	return w.decode()
}

func (w typeRow) decode() (cairn.Type, error) {
	t := cairn.Type{Path: w.path, Revision: w.revision, Group: w.group, Version: w.version}
	t.JSONSchema = decodeRaw(w.schema)
	t.CreatedAt = decodeTime(w.createdAt)
	if err := decodeJSON("additionalRefs", w.refs, &t.AdditionalRefs); err != nil {
		return cairn.Type{}, err
	}
	if w.names.Valid {
		t.Names = new(cairn.Names)
		if err := decodeJSON("names", w.names, t.Names); err != nil {
			return cairn.Type{}, err
		}
	}
	if err := decodeJSON("additionalPrinterColumns", w.columns, &t.PrinterColumns); err != nil {
		return cairn.Type{}, err
	}
	return t, nil
}

// typeDecodes keeps the Types GetType decoded, with the row each came
// from: a Type read again is still read from the store (a Type deleted and
// registered again, by any process, is seen), but decoding its JSON
// columns is skipped when the row is the same. Bounded: when full it
// starts again.
type typeDecodes struct {
	mu sync.Mutex
	m  map[cairn.TypeRef]decodedType
}

type decodedType struct {
	row typeRow
	t   cairn.Type
}

const maxTypeDecodes = 512

// get returns the Type of row w, decoding it unless it was decoded from the
// same row before. What it returns shares nothing with what it keeps.
func (d *typeDecodes) get(w typeRow) (cairn.Type, error) {
	ref := cairn.TypeRef{Path: w.path, Revision: w.revision}
	d.mu.Lock()
	k, ok := d.m[ref]
	d.mu.Unlock()
	if ok && k.row == w {
		return cloneType(k.t), nil
	}
	t, err := w.decode()
	if err != nil {
		return cairn.Type{}, err
	}
	d.mu.Lock()
	if d.m == nil || len(d.m) >= maxTypeDecodes {
		d.m = make(map[cairn.TypeRef]decodedType)
	}
	d.m[ref] = decodedType{row: w, t: cloneType(t)}
	d.mu.Unlock()
	return t, nil
}

// cloneType copies what a caller could write to through t.
func cloneType(t cairn.Type) cairn.Type {
	t.JSONSchema = slices.Clone(t.JSONSchema)
	t.AdditionalRefs = slices.Clone(t.AdditionalRefs)
	if t.Names != nil {
		n := *t.Names
		n.ShortNames = slices.Clone(n.ShortNames)
		n.Categories = slices.Clone(n.Categories)
		t.Names = &n
	}
	t.PrinterColumns = slices.Clone(t.PrinterColumns)
	return t
}

func (r reader) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	w, err := scanTypeRow(r.queryRow(ctx, qGetType, ref.Path, ref.Revision))
	var t cairn.Type
	if err == nil {
		if r.types != nil {
			t, err = r.types.get(w)
		} else {
			t, err = w.decode()
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return cairn.Type{}, cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	if err != nil {
		return cairn.Type{}, fmt.Errorf("sqlite: get type %s: %w", ref, err)
	}
	return t, nil
}

// TypeMatches checks Type ref against a schema and whether it has names
// (store.TypeMatcher). In a write transaction the Type cannot change until
// it ends but by the transaction's own writes (SQLite has one writer), so
// a yes is kept for the transaction (txKnown) until one of those: the
// writes of a group creating instances of one Type ask SQLite once.
func (t *tx) TypeMatches(ctx context.Context, ref cairn.TypeRef, jsonSchema json.RawMessage, named bool) (bool, error) {
	if k := t.known; k != nil {
		for _, m := range k.matched {
			if m.ref == ref && m.named == named && m.null == (jsonSchema == nil) && m.schema == string(jsonSchema) {
				return true, nil
			}
		}
	}
	var doc any // NULL for no schema; TEXT, as stored, otherwise
	if jsonSchema != nil {
		doc = string(jsonSchema)
	}
	var ok bool
	if err := t.queryRow(ctx, qTypeMatches, ref.Path, ref.Revision, doc, named).Scan(&ok); err != nil {
		return false, fmt.Errorf("sqlite: get type %s: %w", ref, err)
	}
	if ok && t.known != nil {
		s, _ := doc.(string)
		t.known.matched = append(t.known.matched, typeMatch{ref: ref, schema: s, null: jsonSchema == nil, named: named})
	}
	return ok, nil
}

func (r reader) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	var (
		where []string
		args  []any
	)
	if p := strings.TrimSuffix(f.PathPrefix, ".*"); p != "" {
		// path = p or path starts with "p.": the half-open range ["p.", "p/")
		// since '/' follows '.'. An index serves it; LIKE is case-insensitive
		// and has wildcards.
		where = append(where, `(path = ? OR (path >= ? AND path < ?))`)
		args = append(args, p, p+".", p+"/")
	}
	if f.Parent != "" {
		where = append(where, `EXISTS (SELECT 1 FROM type_parents p WHERE p.path = types.path AND p.revision = types.revision AND p.parent = ?)`)
		args = append(args, f.Parent)
	}
	if f.Group != "" {
		where = append(where, `rest_group = ?`)
		args = append(args, f.Group)
	}
	if f.Version != "" {
		where = append(where, `rest_version = ?`)
		args = append(args, f.Version)
	}
	q := qListTypesAll
	if len(where) > 0 {
		q = `SELECT ` + typeColumns + ` FROM types WHERE ` + strings.Join(where, ` AND `) + ` ORDER BY path, revision_key DESC, revision DESC`
	}

	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list types: %w", err)
	}
	defer rows.Close()
	var out []cairn.Type
	for rows.Next() {
		t, err := scanType(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list types: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list types: %w", err)
	}
	return out, nil
}

func (t *tx) CreateType(ctx context.Context, typ cairn.Type) error {
	t.known.forgetTypes()
	schema, err := encodeRaw("jsonSchema", typ.JSONSchema)
	if err != nil {
		return err
	}
	refs, err := encodeJSON("additionalRefs", typ.AdditionalRefs, len(typ.AdditionalRefs) == 0)
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
	n, err := t.exec(ctx, qInsertType,
		typ.Path, typ.Revision, store.RevisionKey(typ.Revision), schema, refs, typ.Group, typ.Version, names, columns, createdAt)
	if err != nil {
		return fmt.Errorf("sqlite: create type %s: %w", typ.Ref(), err)
	}
	if n == 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "type %q already exists", typ.Ref())
	}
	for _, parent := range typ.AdditionalRefs {
		if _, err := t.exec(ctx, qInsertParent, typ.Path, typ.Revision, parent); err != nil {
			return fmt.Errorf("sqlite: create type %s: parent %s: %w", typ.Ref(), parent, err)
		}
	}
	return nil
}

func (t *tx) DeleteType(ctx context.Context, ref cairn.TypeRef) error {
	t.known.forgetTypes()
	n, err := t.exec(ctx, qDeleteType, ref.Path, ref.Revision)
	if err != nil {
		return fmt.Errorf("sqlite: delete type %s: %w", ref, err)
	}
	if n == 1 {
		return nil
	}
	if _, err := t.GetType(ctx, ref); err != nil {
		return err
	}
	used, err := t.CountInstances(ctx, ref)
	if err != nil {
		return fmt.Errorf("sqlite: delete type %s: %w", ref, err)
	}
	return cairn.Errorf(cairn.CodeUsedBy, "type %q has %d instance(s)", ref, used)
}
