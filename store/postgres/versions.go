package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const (
	versionColumns = `resource_version, created_by, created_at, attributes, context`
	qVersions      = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = $1 ORDER BY resource_version`
	qVersion       = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = $1 AND resource_version = $2`

	// qAdvanceLatest is the compare-and-set that keeps resource versions
	// gapless: it moves latest_rv to $2 only from $2-1, under the row lock
	// UPDATE takes (a concurrent writer's committed change is re-checked).
	qAdvanceLatest = `UPDATE instances SET latest_rv = $2 WHERE id = $1 AND latest_rv = $2 - 1`
	qLatest        = `SELECT latest_rv FROM instances WHERE id = $1`
	qInsertVersion = `INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context)
VALUES ($1, $2, $3, $4, $5, $6)`
	qDeleteLatestAttrs = `DELETE FROM latest_attributes WHERE instance_id = $1`
	qInsertLatestAttrs = `INSERT INTO latest_attributes (instance_id, path, revision)
SELECT $1::text, x.path, x.revision FROM unnest($2::text[], $3::text[]) AS x(path, revision) ON CONFLICT DO NOTHING`
)

func scanVersion(row pgx.Row) (cairn.ResourceVersion, error) {
	var (
		v                cairn.ResourceVersion
		createdAt        pgtype.Timestamptz
		attrs, rvContext []byte
	)
	if err := row.Scan(&v.ResourceVersion, &v.CreatedBy, &createdAt, &attrs, &rvContext); err != nil {
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
	rows, err := r.q.Query(ctx, qVersions, id)
	if err != nil {
		return nil, fmt.Errorf("postgres: resource versions of %s: %w", id, classify(err))
	}
	defer rows.Close()
	var out []cairn.ResourceVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: resource versions of %s: %w", id, classify(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: resource versions of %s: %w", id, classify(err))
	}
	// Every instance has version 1, so no rows means no instance.
	if len(out) == 0 {
		return nil, notFound(id)
	}
	return out, nil
}

func (r reader) ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error) {
	v, err := scanVersion(r.q.QueryRow(ctx, qVersion, id, rv))
	if errors.Is(err, pgx.ErrNoRows) {
		return cairn.ResourceVersion{}, cairn.Errorf(cairn.CodeNotFound, "resource version %d of instance %q not found", rv, id)
	}
	if err != nil {
		return cairn.ResourceVersion{}, fmt.Errorf("postgres: resource version %d of %s: %w", rv, id, classify(err))
	}
	return v, nil
}

func (t *tx) AddResourceVersion(ctx context.Context, id string, rv cairn.ResourceVersion) error {
	createdAt, err := encodeTime(rv.CreatedAt)
	if err != nil {
		return err
	}
	attrs, err := encodeJSON("attributes", rv.Attributes, len(rv.Attributes) == 0)
	if err != nil {
		return err
	}
	rvContext, err := encodeRaw("context", rv.Context)
	if err != nil {
		return err
	}

	tag, err := t.q.Exec(ctx, qAdvanceLatest, id, rv.ResourceVersion)
	if err != nil {
		return fmt.Errorf("postgres: add resource version to %s: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return t.notNext(ctx, id, rv.ResourceVersion)
	}

	paths, revisions := attributeArrays(rv.Attributes)
	b := &pgx.Batch{}
	b.Queue(qInsertVersion, id, rv.ResourceVersion, rv.CreatedBy, createdAt, attrs, rvContext)
	b.Queue(qDeleteLatestAttrs, id)
	b.Queue(qInsertLatestAttrs, id, paths, revisions)
	t.record(b, store.Modified, id)
	if err := t.q.SendBatch(ctx, b).Close(); err != nil {
		err = classify(err)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			// The primary key caught a version the compare-and-set let by.
			return &cairn.Error{Code: cairn.CodeConflict, IDs: []string{id}, Err: err,
				Msg: fmt.Sprintf("instance %q: resource version %d already exists", id, rv.ResourceVersion)}
		}
		return fmt.Errorf("postgres: add resource version to %s: %w", id, err)
	}
	return nil
}

// notNext explains why the compare-and-set matched no row.
func (t *tx) notNext(ctx context.Context, id string, rv int) error {
	var latest int
	err := t.q.QueryRow(ctx, qLatest, id).Scan(&latest)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("postgres: add resource version to %s: %w", id, classify(err))
	}
	return &cairn.Error{
		Code: cairn.CodeConflict,
		Msg:  fmt.Sprintf("instance %q: resource version %d is not the next one (latest is %d)", id, rv, latest),
		IDs:  []string{id},
	}
}
