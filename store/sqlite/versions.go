package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func scanVersion(sc interface{ Scan(...any) error }) (cairn.ResourceVersion, error) {
	var (
		v                cairn.ResourceVersion
		createdAt        sql.NullInt64
		attrs, rvContext sql.NullString
	)
	if err := sc.Scan(&v.ResourceVersion, &v.CreatedBy, &createdAt, &attrs, &rvContext); err != nil {
		return cairn.ResourceVersion{}, err
	}
	v.CreatedAt = decodeTime(createdAt)
	v.Context = decodeRaw(rvContext)
	if err := decodeJSON("attributes", attrs, &v.Attributes); err != nil {
		return cairn.ResourceVersion{}, err
	}
	return v, nil
}

func (r reader) ResourceVersions(ctx context.Context, id string) ([]cairn.ResourceVersion, error) {
	rows, err := r.query(ctx, qVersions, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: resource versions of %s: %w", id, err)
	}
	defer rows.Close()
	var out []cairn.ResourceVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: resource versions of %s: %w", id, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: resource versions of %s: %w", id, err)
	}
	// Every instance has version 1, so no rows means no instance.
	if len(out) == 0 {
		return nil, notFound(id)
	}
	return out, nil
}

// idRow reads an instance id before the columns scanVersion reads.
type idRow struct {
	row interface{ Scan(...any) error }
	id  *string
}

func (r idRow) Scan(dest ...any) error { return r.row.Scan(append([]any{r.id}, dest...)...) }

func (r reader) ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
	out := make(map[string][]cairn.ResourceVersion, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := r.query(ctx, qVersionsOf, idList(ids))
	if err != nil {
		return nil, fmt.Errorf("sqlite: resource versions of %d instances: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		v, err := scanVersion(idRow{row: rows, id: &id})
		if err != nil {
			return nil, fmt.Errorf("sqlite: resource versions of %d instances: %w", len(ids), err)
		}
		out[id] = append(out[id], v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: resource versions of %d instances: %w", len(ids), err)
	}
	return out, nil
}

func (r reader) ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error) {
	v, err := scanVersion(r.queryRow(ctx, qVersion, id, rv))
	if errors.Is(err, sql.ErrNoRows) {
		return cairn.ResourceVersion{}, cairn.Errorf(cairn.CodeNotFound, "resource version %d of instance %q not found", rv, id)
	}
	if err != nil {
		return cairn.ResourceVersion{}, fmt.Errorf("sqlite: resource version %d of %s: %w", rv, id, err)
	}
	return v, nil
}

func (t *tx) AddResourceVersion(ctx context.Context, id string, rv cairn.ResourceVersion) error {
	row, err := versionRow(id, rv)
	if err != nil {
		return err
	}
	// The instance moves to rv only from the version before it; when it
	// does not, the latest version is read to say why.
	n, err := t.exec(ctx, qSetLatest, rv.ResourceVersion, id)
	if err != nil {
		return fmt.Errorf("sqlite: add resource version to %s: %w", id, err)
	}
	if n == 0 {
		var latest int
		err := t.queryRow(ctx, qLatestVersion, id).Scan(&latest)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("sqlite: add resource version to %s: %w", id, err)
		}
		return &cairn.Error{
			Code: cairn.CodeConflict,
			Msg:  fmt.Sprintf("instance %q: resource version %d is not the next one (latest is %d)", id, rv.ResourceVersion, latest),
			IDs:  []string{id},
		}
	}
	if _, err := t.exec(ctx, qInsertVersion, row...); err != nil {
		// Put latest_rv back: a caller that goes on after this error
		// must not find the instance pointing at a version not there.
		_, rerr := t.exec(ctx, qUnsetLatest, rv.ResourceVersion, id)
		return errors.Join(fmt.Errorf("sqlite: insert resource version %d of %s: %w", rv.ResourceVersion, id, err), rerr)
	}
	if _, err := t.exec(ctx, qDeleteLatestAttrs, id); err != nil {
		return fmt.Errorf("sqlite: add resource version to %s: %w", id, err)
	}
	if err := t.insertLatestAttributes(ctx, id, rv.Attributes); err != nil {
		return err
	}
	return t.recordChange(ctx, store.Modified, id)
}

// insertVersion stores one resource version row.
func (t *tx) insertVersion(ctx context.Context, id string, rv cairn.ResourceVersion) error {
	row, err := versionRow(id, rv)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, qInsertVersion, row...); err != nil {
		return fmt.Errorf("sqlite: insert resource version %d of %s: %w", rv.ResourceVersion, id, err)
	}
	return nil
}

// versionRow encodes the arguments of qInsertVersion.
func versionRow(id string, rv cairn.ResourceVersion) ([]any, error) {
	createdAt, err := encodeTime(rv.CreatedAt)
	if err != nil {
		return nil, err
	}
	attrs, err := encodeJSON("attributes", rv.Attributes, len(rv.Attributes) == 0)
	if err != nil {
		return nil, err
	}
	rvContext, err := encodeRaw("context", rv.Context)
	if err != nil {
		return nil, err
	}
	return []any{id, rv.ResourceVersion, rv.CreatedBy, createdAt, attrs, rvContext}, nil
}

// insertLatestAttributes indexes the latest version's attributes for
// InstanceFilter.Attributes.
func (t *tx) insertLatestAttributes(ctx context.Context, id string, attrs []cairn.AttributeRef) error {
	for _, a := range attrs {
		if _, err := t.exec(ctx, qInsertLatestAttr, id, a.Path, a.Revision); err != nil {
			return fmt.Errorf("sqlite: index attribute %s of %s: %w", a.Path, id, err)
		}
	}
	return nil
}
