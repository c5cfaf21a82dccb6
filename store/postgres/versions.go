package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const (
	versionColumns = `resource_version, created_by, created_at, attributes, context`
	qVersions      = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = $1 ORDER BY resource_version`
	qVersionsOf    = `SELECT instance_id, ` + versionColumns + ` FROM resource_versions WHERE instance_id = ANY($1) ORDER BY instance_id, resource_version`
	qVersion       = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = $1 AND resource_version = $2`

	// qAddVersion appends a resource version in one statement. Its core is
	// the compare-and-set that keeps versions gapless: latest_rv moves to
	// $2 only from $2-1, under the row lock UPDATE takes (a concurrent
	// writer's committed change is re-checked), and everything else
	// happens only when it matched. The latest attributes are replaced by
	// deleting those not in the new set and inserting the new ones (ON
	// CONFLICT DO NOTHING keeps those in both). With $9 the statement also
	// logs the change: it takes the change-log lock first and the Seq
	// (nextval) only when the compare-and-set matched.
	qAddVersion = `WITH ` + lockChangeLog + `,
cas AS (
	UPDATE instances i SET latest_rv = $2, seq = CASE WHEN $9::boolean THEN nextval('changes_seq') ELSE i.seq END
	FROM lock WHERE i.id = $1 AND i.latest_rv = $2 - 1
	RETURNING i.id, i.type_path, i.type_revision, i.namespace, i.name, i.seq
), v AS (
	INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context)
	SELECT cas.id, $2::integer, $3::text, $4::timestamptz, $5::json, $6::json FROM cas
), d AS (
	DELETE FROM latest_attributes a USING cas
	WHERE a.instance_id = cas.id
	AND (a.path, a.revision) NOT IN (SELECT x.path, x.revision FROM unnest($7::text[], $8::text[]) AS x(path, revision))
), n AS (
	INSERT INTO latest_attributes (instance_id, path, revision)
	SELECT cas.id, x.path, x.revision FROM cas, unnest($7::text[], $8::text[]) AS x(path, revision)
	ON CONFLICT DO NOTHING
), c AS (
	INSERT INTO changes (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
	SELECT cas.seq, 'MODIFIED', cas.id, cas.type_path, cas.type_revision, cas.namespace, cas.name, $10::timestamptz
	FROM cas WHERE $9::boolean
)
SELECT count(*) FROM cas`
	qLatest = `SELECT latest_rv FROM instances WHERE id = $1`
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

// idRow reads an instance id before the columns scanVersion reads.
type idRow struct {
	row pgx.Row
	id  *string
}

func (r idRow) Scan(dest ...any) error { return r.row.Scan(append([]any{r.id}, dest...)...) }

func (r reader) ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
	out := make(map[string][]cairn.ResourceVersion, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := r.q.Query(ctx, qVersionsOf, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: resource versions of %d instances: %w", len(ids), classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		v, err := scanVersion(idRow{row: rows, id: &id})
		if err != nil {
			return nil, fmt.Errorf("postgres: resource versions of %d instances: %w", len(ids), classify(err))
		}
		out[id] = append(out[id], v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: resource versions of %d instances: %w", len(ids), classify(err))
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

	paths, revisions := attributeArrays(rv.Attributes)
	log := !t.recorded[id]
	var n int
	err = t.q.QueryRow(ctx, qAddVersion, id, rv.ResourceVersion, rv.CreatedBy, createdAt, attrs, rvContext,
		paths, revisions, log, time.Now().UTC()).Scan(&n)
	if err != nil {
		err = classify(err)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			// The primary key caught a version the compare-and-set let by.
			return &cairn.Error{Code: cairn.CodeConflict, IDs: []string{id}, Err: err,
				Msg: fmt.Sprintf("instance %q: resource version %d already exists", id, rv.ResourceVersion)}
		}
		return fmt.Errorf("postgres: add resource version to %s: %w", id, err)
	}
	if n == 0 {
		return t.notNext(ctx, id, rv.ResourceVersion)
	}
	if log {
		t.noteRecorded(store.Modified, id)
	}
	t.conn.locked[id] = true // UPDATE locked the row
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
