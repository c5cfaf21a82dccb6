package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const (
	// lockChangeLog is the CTE every change-log write starts with: it
	// locks the one row of change_log_lock until the transaction ends (a
	// no-op when the transaction already holds it). Seqs are taken with
	// nextval only in rows joined with it, that is after the lock is held;
	// see the package documentation.
	lockChangeLog = `lock AS (SELECT id FROM change_log_lock WHERE id = 1 FOR UPDATE)`

	// qRecordChange appends one change of an existing instance to the log,
	// taking its identity from the row, and stamps the instance with the
	// change's Seq. Nothing happens when the instance is absent.
	qRecordChange = `WITH ` + lockChangeLog + `,
c AS (
	SELECT nextval('changes_seq') AS seq, i.id, i.type_path, i.type_revision, i.namespace, i.name
	FROM lock, instances i WHERE i.id = $2
), ins AS (
	INSERT INTO changes (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
	SELECT c.seq, $1, c.id, c.type_path, c.type_revision, c.namespace, c.name, $3 FROM c
)
UPDATE instances i SET seq = c.seq FROM c WHERE i.id = c.id`

	// qChanges reads the pruned point and the changes in one statement, so
	// both come from one snapshot even while another replica prunes.
	qChanges = `SELECT p.through, c.seq, c.kind, c.instance_id, c.type_path, c.type_revision, c.namespace, c.name, c.at
FROM changes_pruned p
LEFT JOIN LATERAL (SELECT * FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2) c ON true
WHERE p.id = 1
ORDER BY c.seq`
	// qLastSeq is the newest committed change, or the pruned point when
	// every change was pruned. Both only grow: changes become visible in
	// Seq order, and a prune moves the pruned point in the transaction
	// that deletes.
	qLastSeq = `SELECT GREATEST((SELECT COALESCE(max(seq), 0) FROM changes), (SELECT through FROM changes_pruned WHERE id = 1))`
	// qPruneChanges never moves the pruned point past the newest change:
	// Seqs handed out later are higher than every existing one, but not
	// necessarily higher than an arbitrary number, so a pruned point beyond
	// the newest change could hide them.
	qPruneChanges = `WITH d AS (DELETE FROM changes WHERE seq <= $1)
UPDATE changes_pruned SET through = GREATEST(through, LEAST($1, (SELECT COALESCE(max(seq), 0) FROM changes))) WHERE id = 1`
)

// record queues the change-log entry of a change to instance id on b,
// after the statements that make the change (or, for a deletion, before the
// one that deletes the row). A transaction logs one change per instance, at
// its first change of it, however many parts of it the transaction writes
// (an instance created and changed is one ADDED); a deletion is always a
// change of its own, after which the id may be created and changed again.
func (t *tx) record(b *pgx.Batch, kind store.ChangeKind, id string) {
	if kind != store.Deleted && t.recorded[id] {
		return
	}
	b.Queue(qRecordChange, string(kind), id, time.Now().UTC())
	t.noteRecorded(kind, id)
}

func (t *tx) noteRecorded(kind store.ChangeKind, id string) {
	if t.recorded == nil {
		t.recorded = map[string]bool{}
	}
	t.recorded[id] = kind != store.Deleted
}

func (r reader) Changes(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := r.q.Query(ctx, qChanges, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	return scanChanges(rows, after)
}

// scanChanges reads qChanges's rows: CodeGone when the log no longer
// reaches back to after.
func scanChanges(rows pgx.Rows, after int64) ([]store.Change, error) {
	defer rows.Close()
	var (
		out    []store.Change
		pruned int64
	)
	for rows.Next() {
		var (
			seq                           *int64
			kind, id, path, rev, ns, name *string
			at                            pgtype.Timestamptz
		)
		if err := rows.Scan(&pruned, &seq, &kind, &id, &path, &rev, &ns, &name, &at); err != nil {
			return nil, fmt.Errorf("postgres: changes: %w", classify(err))
		}
		if seq == nil { // no change after the position: the pruned point only
			continue
		}
		out = append(out, store.Change{
			Seq: *seq, Kind: store.ChangeKind(*kind), InstanceID: *id,
			TypeRef: cairn.TypeRef{Path: *path, Revision: *rev}, Namespace: *ns, Name: *name, At: decodeTime(at),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	if after < pruned {
		return nil, cairn.Errorf(cairn.CodeGone, "changes after %d are no longer kept (the change log starts after %d)", after, pruned)
	}
	return out, nil
}

func (r reader) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := r.q.QueryRow(ctx, qLastSeq).Scan(&seq); err != nil {
		return 0, fmt.Errorf("postgres: last change: %w", classify(err))
	}
	return seq, nil
}

func (t *tx) PruneChanges(ctx context.Context, through int64) error {
	if _, err := t.q.Exec(ctx, qPruneChanges, through); err != nil {
		return fmt.Errorf("postgres: prune changes: %w", classify(err))
	}
	return nil
}

const (
	// changedIDs are the instances named by the changes qChanges reads.
	changedIDs = `(SELECT instance_id FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2)`
	// qChangedInstances and qChangedValues read, for ChangesWithInstances,
	// the instances the changes name and the built-in values of their
	// latest resource versions.
	qChangedInstances = instanceSelect + withRelations + instanceFrom + ` WHERE i.id IN ` + changedIDs
	qChangedValues    = `SELECT v.instance_id, v.value FROM instances i
JOIN builtin_values v ON v.instance_id = i.id AND v.resource_version = i.latest_rv
WHERE i.backend_abstract AND i.id IN ` + changedIDs
)

// ChangesWithInstances is Changes together with the instances the changes
// name as they are now (with their relations; an instance no longer there
// was deleted) and, on those whose values the built-in backend keeps
// (Backend.Abstract), the value of their latest resource version in
// Latest.Value: set on all of them or, when one is missing, on none. The
// three reads share one snapshot and one round trip, so a replica kept
// current by the log (hub/cache) learns of a commit with one request.
func (s *Store) ChangesWithInstances(ctx context.Context, after int64, limit int) ([]store.Change, []cairn.Instance, error) {
	if limit <= 0 {
		limit = 1000
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	b.Queue(qChanges, after, limit)
	b.Queue(qChangedInstances, after, limit)
	b.Queue(qChangedValues, after, limit)
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	cs, err := scanChanges(rows, after)
	if err != nil {
		return nil, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: changed instances: %w", classify(err))
	}
	found, err := scanInstances(rows, true)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: changed instances: %w", err)
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: changed values: %w", classify(err))
	}
	values := map[string][]byte{}
	var (
		id string
		v  []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error {
		values[id] = slices.Clone(v)
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("postgres: changed values: %w", classify(err))
	}
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("postgres: changes: %w", classify(err))
	}
	if len(cs) == 0 {
		return nil, nil, nil
	}
	complete := true
	for _, in := range found {
		if _, ok := values[in.ID]; in.Backend.Abstract && !ok {
			complete = false
		}
	}
	if complete {
		for i := range found {
			if v, ok := values[found[i].ID]; ok {
				found[i].Latest.Value = decodeRaw(v)
			}
		}
	}
	return cs, found, nil
}
