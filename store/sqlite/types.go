package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func scanType(sc interface{ Scan(...any) error }) (cairn.Type, error) {
	var (
		t                   cairn.Type
		schema, refs, names sql.NullString
		columns             sql.NullString
		createdAt           sql.NullInt64
	)
	if err := sc.Scan(&t.Path, &t.Revision, &schema, &refs, &t.Group, &t.Version, &names, &columns, &createdAt); err != nil {
		return cairn.Type{}, err
	}
	t.JSONSchema = decodeRaw(schema)
	t.CreatedAt = decodeTime(createdAt)
	if err := decodeJSON("additionalRefs", refs, &t.AdditionalRefs); err != nil {
		return cairn.Type{}, err
	}
	if names.Valid {
		t.Names = new(cairn.Names)
		if err := decodeJSON("names", names, t.Names); err != nil {
			return cairn.Type{}, err
		}
	}
	if err := decodeJSON("additionalPrinterColumns", columns, &t.PrinterColumns); err != nil {
		return cairn.Type{}, err
	}
	return t, nil
}

func (r reader) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	t, err := scanType(r.queryRow(ctx, qGetType, ref.Path, ref.Revision))
	if errors.Is(err, sql.ErrNoRows) {
		return cairn.Type{}, cairn.Errorf(cairn.CodeNotFound, "type %q not found", ref)
	}
	if err != nil {
		return cairn.Type{}, fmt.Errorf("sqlite: get type %s: %w", ref, err)
	}
	return t, nil
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
