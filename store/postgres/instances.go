package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// reader implements store.Reader on the pool or, with lock set, inside an
// Update transaction, where GetInstances locks what it reads.
type reader struct {
	q    querier
	lock bool
}

// tx implements store.Tx.
type tx struct {
	reader
	recorded map[string]bool // instances this transaction logged a change of (not a deletion)
	// conn holds back writes whose only answer is an error (SetMetadata,
	// SetStatus, SetManagedFields) until the next statement that is waited
	// for, saving their round trips; see txConn.
	conn *txConn
}

// holdRecord holds back the change-log entry of a change to id, as record
// queues it (kind Modified).
func (t *tx) holdRecord(id, what string) {
	if t.recorded[id] {
		return
	}
	t.conn.hold(qRecordChange, []any{string(store.Modified), id, time.Now().UTC()}, func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("postgres: set %s of %s: %w", what, id, classify(err))
		}
		return nil
	})
	t.noteRecorded(store.Modified, id)
}

// holdExec holds back a statement whose only answer is an error.
func (t *tx) holdExec(id, what, query string, args ...any) {
	t.conn.hold(query, args, func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("postgres: set %s of %s: %w", what, id, classify(err))
		}
		return nil
	})
}

var (
	_ store.Tx          = (*tx)(nil)
	_ store.TypeMatcher = (*tx)(nil)
)

const (
	// instanceSelect reads an instance with its latest resource version and
	// its labels (as sorted key and value arrays) in one row, so a read is
	// one statement and one snapshot; callers append the relations columns,
	// instanceFrom, WHERE and ORDER BY.
	instanceSelect = `SELECT i.id, i.type_path, i.type_revision, i.namespace, i.name, i.alias, i.annotations,
	i.backend_id, i.backend_abstract, i.locked_by, i.created_at, i.seq, i.status, i.managed_fields,
	v.resource_version, v.created_by, v.created_at, v.attributes, v.context,
	l.keys, l.vals`
	// otherOrder sorts uses edges by the instance at the other end, o.
	otherOrder = ` ORDER BY o.type_path, o.type_revision_key DESC, o.type_revision DESC, COALESCE(o.created_at, '-infinity') DESC, o.id`
	// An instance uses its backend without a row in uses (instances.
	// backend_id says so), as in store/sqlite: the relations take the rows
	// of uses and the backend edges together. An instance that is its own
	// backend does not use itself; a backend that is no instance is no
	// edge. AddUses writes no row for an instance's own backend, so the
	// two never hold the same edge.
	withRelations = `,
	ARRAY(SELECT o.id FROM instances o WHERE o.id IN (
		SELECT u.to_id FROM uses u WHERE u.from_id = i.id UNION ALL SELECT i.backend_id WHERE i.backend_id <> i.id)` + otherOrder + `),
	ARRAY(SELECT o.id FROM instances o WHERE o.id IN (
		SELECT u.from_id FROM uses u WHERE u.to_id = i.id UNION ALL SELECT b.id FROM instances b WHERE b.backend_id = i.id AND b.id <> i.id)` + otherOrder + `)`
	withoutRelations = `, NULL::text[], NULL::text[]`
	instanceFrom     = `
FROM instances i
JOIN resource_versions v ON v.instance_id = i.id AND v.resource_version = i.latest_rv
LEFT JOIN LATERAL (SELECT array_agg(key ORDER BY key) AS keys, array_agg(value ORDER BY key) AS vals
	FROM instance_labels WHERE instance_id = i.id) l ON true`
	instanceOrder = ` ORDER BY i.type_path, i.type_revision_key DESC, i.type_revision DESC, COALESCE(i.created_at, '-infinity') DESC, i.id`
	// nameOrder and idOrder are store.ByName's and store.ByID's: the
	// UNIQUE (type_path, namespace, name) index gives the first for one
	// type path, the primary key the second.
	nameOrder = ` ORDER BY i.namespace, i.name, i.type_path`
	idOrder   = ` ORDER BY i.id`

	// qLockInstances locks rows in id order, so that transactions locking
	// overlapping sets queue instead of deadlocking. FOR NO KEY UPDATE does
	// not block the key-share locks of foreign key checks (adding a uses
	// edge to a locked instance).
	qLockInstances = `SELECT id FROM instances WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`

	// qCreateInstance inserts an instance, its first resource version,
	// labels, attributes and its ADDED change in one statement; it returns 0
	// when the id or the name is taken. The change-log lock is taken before
	// the insert, so a transaction with an uncommitted instance always
	// holds it: ON CONFLICT never waits for another transaction's insert
	// while holding the lock. A failed insert skips a Seq, nothing more.
	qCreateInstance = `WITH ` + lockChangeLog + `,
i AS (
	INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, alias,
		annotations, backend_id, backend_abstract, locked_by, created_at, latest_rv, seq)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8::json, $9, $10::boolean, $11, $12::timestamptz, $13::integer, nextval('changes_seq') FROM lock
	ON CONFLICT DO NOTHING RETURNING id, seq
), v AS (
	INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context)
	SELECT i.id, $13::integer, $14::text, $15::timestamptz, $16::json, $17::json FROM i
), l AS (
	INSERT INTO instance_labels (instance_id, key, value)
	SELECT i.id, x.key, x.value FROM i, unnest($18::text[], $19::text[]) AS x(key, value)
), a AS (
	INSERT INTO latest_attributes (instance_id, path, revision)
	SELECT i.id, x.path, x.revision FROM i, unnest($20::text[], $21::text[]) AS x(path, revision)
	ON CONFLICT DO NOTHING
), c AS (
	INSERT INTO changes (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
	SELECT i.seq, 'ADDED', i.id, $2, $3, $5, $6, $22::timestamptz FROM i
)
SELECT count(*) FROM i`
	qTakenInstance = `SELECT id, type_path, namespace, name FROM instances
WHERE id = $1 OR (type_path = $2 AND namespace = $3 AND name = $4) ORDER BY id = $1 DESC LIMIT 1`

	// qAddUses key-share locks both ends (so neither can be deleted until
	// this transaction ends) and inserts the edge only when both exist and
	// it is not the one to from's own backend (withRelations).
	qAddUses = `WITH e AS (SELECT id, backend_id FROM instances WHERE id = ANY($1::text[]) FOR KEY SHARE),
ins AS (
	INSERT INTO uses (from_id, to_id) SELECT $2::text, $3::text
	WHERE (SELECT count(*) FROM e) = cardinality($1::text[])
	AND NOT EXISTS (SELECT 1 FROM e WHERE e.id = $2::text AND e.backend_id = $3::text AND $2::text <> $3::text)
	ON CONFLICT DO NOTHING
)
SELECT COALESCE(array_agg(id), '{}') FROM e`

	qSetAnnotations = `UPDATE instances SET annotations = $2 WHERE id = $1`
	qSetStatus      = `UPDATE instances SET status = $2::json WHERE id = $1`
	qSetManaged     = `UPDATE instances SET managed_fields = $2::json WHERE id = $1`
	qDeleteUses     = `DELETE FROM uses WHERE from_id = $1 AND to_id = $2`
	qUsesExists     = `SELECT EXISTS (SELECT 1 FROM uses WHERE from_id = $1 AND to_id = $2)`
	// qEdgeExists is qUsesExists or the edge to from's own backend.
	qEdgeExists = `SELECT EXISTS (SELECT 1 FROM uses WHERE from_id = $1 AND to_id = $2)
	OR EXISTS (SELECT 1 FROM instances WHERE id = $1 AND backend_id = $2 AND id <> $2)`
	qDeleteLabels = `DELETE FROM instance_labels WHERE instance_id = $1`
	qInsertLabels = `INSERT INTO instance_labels (instance_id, key, value)
SELECT $1::text, x.key, x.value FROM unnest($2::text[], $3::text[]) AS x(key, value)
WHERE EXISTS (SELECT 1 FROM instances WHERE id = $1::text)`
	qSetLockedBy = `UPDATE instances SET locked_by = $2 WHERE id = ANY($1)`

	// qLockForDelete takes the change-log lock before the row's FOR UPDATE
	// lock (see DeleteInstance).
	qLockForDelete = `WITH ` + lockChangeLog + `
SELECT 1 FROM lock, instances i WHERE i.id = $1 FOR UPDATE OF i`
	qUsersOf = `SELECT o.id FROM instances o WHERE o.id IN (
	SELECT u.from_id FROM uses u WHERE u.to_id = $1 AND u.from_id <> u.to_id
	UNION ALL SELECT b.id FROM instances b WHERE b.backend_id = $1 AND b.id <> $1)` + otherOrder
	qDeleteOutgoing = `DELETE FROM uses WHERE from_id = $1`
	qDeleteInstance = `DELETE FROM instances WHERE id = $1`

	qCountInstances = `SELECT count(*) FROM instances WHERE type_path = $1 AND type_revision = $2`
)

func scanInstance(row pgx.Row) (cairn.Instance, error) {
	var (
		in                            cairn.Instance
		annotations, attrs, rvContext []byte
		status, managed               []byte
		createdAt, rvCreatedAt        pgtype.Timestamptz
		keys, vals                    []string
	)
	if err := row.Scan(&in.ID, &in.TypeRef.Path, &in.TypeRef.Revision, &in.Namespace, &in.Name, &in.Alias, &annotations,
		&in.Backend.ID, &in.Backend.Abstract, &in.LockedBy, &createdAt, &in.Seq, &status, &managed,
		&in.Latest.ResourceVersion, &in.Latest.CreatedBy, &rvCreatedAt, &attrs, &rvContext,
		&keys, &vals, &in.Uses, &in.UsedBy); err != nil {
		return cairn.Instance{}, err
	}
	in.CreatedAt = decodeTime(createdAt)
	in.Latest.CreatedAt = decodeTime(rvCreatedAt)
	in.Latest.Context = decodeRaw(rvContext)
	in.Status = decodeRaw(status)
	in.ManagedFields = decodeRaw(managed)
	if err := decodeJSON("annotations", annotations, &in.Annotations); err != nil {
		return cairn.Instance{}, err
	}
	if err := decodeJSON("attributes", attrs, &in.Latest.Attributes); err != nil {
		return cairn.Instance{}, err
	}
	if len(keys) > 0 {
		in.Labels = make(map[string]string, len(keys))
		for i, k := range keys {
			in.Labels[k] = vals[i]
		}
	}
	return in, nil
}

// queryInstances runs one instance query (instanceSelect) and scans its rows.
func (r reader) queryInstances(ctx context.Context, relations bool, query string, a ...any) ([]cairn.Instance, error) {
	rows, err := r.q.Query(ctx, query, a...)
	if err != nil {
		return nil, classify(err)
	}
	return scanInstances(rows, relations)
}

func scanInstances(rows pgx.Rows, relations bool) ([]cairn.Instance, error) {
	defer rows.Close()
	var out []cairn.Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, classify(err)
		}
		if relations {
			if in.Uses == nil {
				in.Uses = []string{}
			}
			if in.UsedBy == nil {
				in.UsedBy = []string{}
			}
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

func relationColumns(relations bool) string {
	if relations {
		return withRelations
	}
	return withoutRelations
}

func (r reader) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return r.getInstances(ctx, ids, true)
}

func (r reader) GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return r.getInstances(ctx, ids, false)
}

func (r reader) getInstances(ctx context.Context, ids []string, relations bool) ([]cairn.Instance, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := instanceSelect + relationColumns(relations) + instanceFrom + ` WHERE i.id = ANY($1)`
	var (
		found []cairn.Instance
		err   error
	)
	if r.lock {
		// Lock first, read afterwards: the read is a statement of its own,
		// so in READ COMMITTED it sees what a writer we waited for
		// committed. Both go in one round trip.
		b := &pgx.Batch{}
		b.Queue(qLockInstances, ids)
		b.Queue(q, ids)
		br := r.q.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("postgres: lock instances: %w", classify(err))
		}
		rows, err := br.Query()
		if err == nil {
			found, err = scanInstances(rows, relations)
		}
		if c, ok := r.q.(*txConn); ok && err == nil {
			for _, in := range found {
				c.locked[in.ID] = true
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("postgres: get instances: %w", classify(err))
		}
	} else if found, err = r.queryInstances(ctx, relations, q, ids); err != nil {
		return nil, fmt.Errorf("postgres: get instances: %w", err)
	}
	byID := make(map[string]cairn.Instance, len(found))
	for _, in := range found {
		byID[in.ID] = in
	}
	out := make([]cairn.Instance, 0, len(found))
	for _, id := range ids {
		if in, ok := byID[id]; ok {
			out = append(out, in)
		}
	}
	return out, nil
}

func (r reader) GetInstanceByName(ctx context.Context, typePath, namespace, name string) (cairn.Instance, error) {
	q := instanceSelect + withRelations + instanceFrom + ` WHERE i.type_path = $1 AND i.namespace = $2 AND i.name = $3`
	found, err := r.queryInstances(ctx, true, q, typePath, namespace, name)
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("postgres: get instance %s/%s/%s: %w", typePath, namespace, name, err)
	}
	if len(found) == 0 {
		return cairn.Instance{}, cairn.Errorf(cairn.CodeNotFound, "instance %q not found", typePath+"/"+namespace+"/"+name)
	}
	return found[0], nil
}

func (r reader) ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error) {
	q, a, err := listQuery(f)
	if err != nil {
		return nil, err
	}
	out, err := r.queryInstances(ctx, true, q, a...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list instances: %w", err)
	}
	return out, nil
}

// listQuery is the query of ListInstances.
func listQuery(f store.InstanceFilter) (string, args, error) {
	where, a, err := instanceWhere(f)
	if err != nil {
		return "", nil, err
	}
	q := instanceSelect + withRelations + instanceFrom
	if where != "" {
		q += ` WHERE ` + where
	}
	switch f.Order {
	case store.ByName:
		q += nameOrder
	case store.ByID:
		q += idOrder
	default:
		q += instanceOrder
	}
	if f.Limit > 0 {
		q += ` LIMIT ` + a.add(f.Limit)
	}
	return q, a, nil
}

// instanceWhere builds one WHERE clause (without the keyword) for f.
func instanceWhere(f store.InstanceFilter) (string, args, error) {
	var (
		where []string
		a     args
	)
	if f.TypePath != "" {
		if p, ok := strings.CutSuffix(f.TypePath, ".*"); ok {
			// prefix "p." as a byte range, see ListTypes
			where = append(where, `(i.type_path >= `+a.add(p+".")+` AND i.type_path < `+a.add(p+"/")+`)`)
		} else {
			where = append(where, `i.type_path = `+a.add(f.TypePath))
		}
	}
	if f.TypeRevision != "" {
		where = append(where, `i.type_revision = `+a.add(f.TypeRevision))
	}
	if f.Namespace != "" {
		where = append(where, `i.namespace = `+a.add(f.Namespace))
	}
	if f.Name != "" {
		where = append(where, `i.name = `+a.add(f.Name))
	}
	if f.ID != "" {
		where = append(where, `i.id = `+a.add(f.ID))
	}
	if f.CreatedBy != "" {
		where = append(where, `v.created_by = `+a.add(f.CreatedBy))
	}
	if f.BackendID != "" {
		where = append(where, `i.backend_id = `+a.add(f.BackendID))
	}
	for _, at := range f.Attributes {
		cond := `EXISTS (SELECT 1 FROM latest_attributes a WHERE a.instance_id = i.id AND a.path = ` + a.add(at.Path)
		if at.Revision != "" {
			cond += ` AND a.revision = ` + a.add(at.Revision)
		}
		cond += `)`
		if at.Exclude {
			cond = `NOT ` + cond
		}
		where = append(where, cond)
	}
	for _, req := range f.Labels {
		cond, err := labelCond(req, &a)
		if err != nil {
			return "", nil, err
		}
		where = append(where, cond)
	}
	if k := f.After; k != nil && f.Order == store.ByName {
		// One type path: a range of the UNIQUE (type_path, namespace,
		// name) index.
		switch {
		case f.TypePath == k.TypeRef.Path && f.Namespace != "" && f.Namespace == k.Namespace:
			where = append(where, `i.name > `+a.add(k.Name))
		case f.TypePath == k.TypeRef.Path:
			where = append(where, `(i.namespace, i.name) > (`+a.add(k.Namespace)+`, `+a.add(k.Name)+`)`)
		default:
			where = append(where, `(i.namespace, i.name, i.type_path) > (`+a.add(k.Namespace)+`, `+a.add(k.Name)+`, `+a.add(k.TypeRef.Path)+`)`)
		}
	} else if k != nil && f.Order == store.ByID {
		where = append(where, `i.id > `+a.add(k.ID))
	} else if k != nil {
		// Rows after k in instanceOrder: path ascending, revision
		// descending, createdAt descending (NULL oldest), id ascending.
		created, err := encodeTime(k.CreatedAt)
		if err != nil {
			return "", nil, err
		}
		p := a.add(k.TypeRef.Path)
		rk := a.add(store.RevisionKey(k.TypeRef.Revision))
		r := a.add(k.TypeRef.Revision)
		c := `COALESCE(` + a.add(created) + `::timestamptz, '-infinity')`
		ic := `COALESCE(i.created_at, '-infinity')`
		where = append(where, `(i.type_path > `+p+`
 OR (i.type_path = `+p+` AND i.type_revision_key < `+rk+`)
 OR (i.type_path = `+p+` AND i.type_revision_key = `+rk+` AND i.type_revision < `+r+`)
 OR (i.type_path = `+p+` AND i.type_revision_key = `+rk+` AND i.type_revision = `+r+` AND `+ic+` < `+c+`)
 OR (i.type_path = `+p+` AND i.type_revision_key = `+rk+` AND i.type_revision = `+r+` AND `+ic+` = `+c+` AND i.id > `+a.add(k.ID)+`))`)
	}
	return strings.Join(where, ` AND `), a, nil
}

// labelCond renders one requirement as an EXISTS or NOT EXISTS subquery,
// with the Kubernetes semantics of labels.Requirement.Matches.
func labelCond(r labels.Requirement, a *args) (string, error) {
	exists := func(valueCond string) string {
		return `EXISTS (SELECT 1 FROM instance_labels l WHERE l.instance_id = i.id AND l.key = ` + a.add(r.Key) + valueCond + `)`
	}
	single := func() (string, error) {
		if len(r.Values) != 1 {
			return "", cairn.Errorf(cairn.CodeInvalid, "label selector on key %q: operator %q takes exactly one value", r.Key, r.Operator)
		}
		return r.Values[0], nil
	}
	switch r.Operator {
	case labels.Equals, labels.NotEquals:
		v, err := single()
		if err != nil {
			return "", err
		}
		cond := exists(` AND l.value = ` + a.add(v))
		if r.Operator == labels.NotEquals {
			cond = `NOT ` + cond
		}
		return cond, nil
	case labels.In, labels.NotIn:
		if len(r.Values) == 0 {
			// "in ()" matches nothing and "notin ()" everything.
			return fmt.Sprint(r.Operator == labels.NotIn), nil
		}
		cond := exists(` AND l.value = ANY(` + a.add(r.Values) + `::text[])`)
		if r.Operator == labels.NotIn {
			cond = `NOT ` + cond
		}
		return cond, nil
	case labels.Exists:
		return exists(""), nil
	case labels.DoesNotExist:
		return `NOT ` + exists(""), nil
	}
	return "", cairn.Errorf(cairn.CodeInvalid, "label selector: unknown operator %q for key %q", r.Operator, r.Key)
}

func (r reader) CountInstances(ctx context.Context, ref cairn.TypeRef) (int, error) {
	var n int
	if err := r.q.QueryRow(ctx, qCountInstances, ref.Path, ref.Revision).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count instances of %s: %w", ref, classify(err))
	}
	return n, nil
}

// labelArrays returns a label set as parallel key and value arrays.
func labelArrays(set map[string]string) (keys, values []string) {
	keys = slices.Sorted(maps.Keys(set))
	values = make([]string, len(keys))
	for i, k := range keys {
		values[i] = set[k]
	}
	return keys, values
}

// attributeArrays returns attribute references as parallel arrays.
func attributeArrays(attrs []cairn.AttributeRef) (paths, revisions []string) {
	paths, revisions = make([]string, len(attrs)), make([]string, len(attrs))
	for i, a := range attrs {
		paths[i], revisions[i] = a.Path, a.Revision
	}
	return paths, revisions
}

func (t *tx) CreateInstance(ctx context.Context, in cairn.Instance) error {
	rv := in.Latest
	if rv.ResourceVersion == 0 { // unset: the first version is 1 anyway
		rv.ResourceVersion = 1
	}
	if rv.ResourceVersion != 1 {
		return cairn.Errorf(cairn.CodeInvalid, "instance %q: the first resource version must be 1, not %d", in.ID, rv.ResourceVersion)
	}
	annotations, err := encodeJSON("annotations", in.Annotations, len(in.Annotations) == 0)
	if err != nil {
		return err
	}
	createdAt, err := encodeTime(in.CreatedAt)
	if err != nil {
		return err
	}
	rvCreatedAt, err := encodeTime(rv.CreatedAt)
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
	keys, values := labelArrays(in.Labels)
	paths, revisions := attributeArrays(rv.Attributes)

	// A conflicting row can vanish between the insert and the lookup (its
	// transaction deleted it); then the insert is simply tried again.
	for range 3 {
		var n int
		err := t.q.QueryRow(ctx, qCreateInstance,
			in.ID, in.TypeRef.Path, in.TypeRef.Revision, store.RevisionKey(in.TypeRef.Revision), in.Namespace, in.Name, in.Alias,
			annotations, in.Backend.ID, in.Backend.Abstract, in.LockedBy, createdAt, rv.ResourceVersion,
			rv.CreatedBy, rvCreatedAt, attrs, rvContext, keys, values, paths, revisions, time.Now().UTC()).Scan(&n)
		if err != nil {
			return fmt.Errorf("postgres: create instance %s: %w", in.ID, classify(err))
		}
		if n == 1 {
			t.noteRecorded(store.Added, in.ID)
			t.conn.locked[in.ID] = true
			return store.SetCreatedExtras(ctx, t, in)
		}
		var takenID, takenPath, takenNS, takenName string
		err = t.q.QueryRow(ctx, qTakenInstance, in.ID, in.TypeRef.Path, in.Namespace, in.Name).
			Scan(&takenID, &takenPath, &takenNS, &takenName)
		switch {
		case err == nil:
			return store.Taken(in, takenID, takenPath, takenNS, takenName)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("postgres: create instance %s: %w", in.ID, classify(err))
		}
	}
	return &cairn.Error{Code: cairn.CodeConflict, IDs: []string{in.ID},
		Msg: fmt.Sprintf("instance %q: its id or name is being taken and released concurrently; retry", in.ID)}
}

func notFound(id string) error {
	return &cairn.Error{Code: cairn.CodeNotFound, Msg: fmt.Sprintf("instance %q not found", id), IDs: []string{id}}
}

func notFoundIDs(ids []string) error {
	if len(ids) == 1 {
		return notFound(ids[0])
	}
	return &cairn.Error{Code: cairn.CodeNotFound, Msg: "instances " + cairn.QuoteIDs(ids) + " not found", IDs: ids}
}

// missing returns those of ids not in found, in order, without repeats.
func missing(ids, found []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(found, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func (t *tx) AddUses(ctx context.Context, from, to string) error {
	// A new edge changes from (its uses), so it is logged as a change of
	// from, or readers kept current by the log (the watch cache, watches)
	// would not learn of an edge between two instances the transaction
	// does not otherwise change. An edge already there changes nothing.
	if err := t.recordEdgeChange(ctx, from, to, false); err != nil {
		return fmt.Errorf("postgres: add uses %s -> %s: %w", from, to, err)
	}
	ends := slices.Compact([]string{from, to})
	var found []string
	if err := t.q.QueryRow(ctx, qAddUses, ends, from, to).Scan(&found); err != nil {
		return fmt.Errorf("postgres: add uses %s -> %s: %w", from, to, classify(err))
	}
	if m := missing(ends, found); len(m) > 0 {
		return notFoundIDs(m)
	}
	return nil
}

// recordEdgeChange logs a change of from when the edge from -> to is about
// to appear (exists false) or disappear (exists true), before the edge's
// row is touched: the change-log lock comes before row locks (see the
// package documentation). The edge to from's own backend is there without
// a row and stays: adding it, or removing it, changes nothing.
func (t *tx) recordEdgeChange(ctx context.Context, from, to string, exists bool) error {
	if t.recorded[from] {
		return nil
	}
	q := qEdgeExists
	if exists {
		q = qUsesExists
	}
	var there bool
	if err := t.q.QueryRow(ctx, q, from, to).Scan(&there); err != nil {
		return classify(err)
	}
	if there != exists {
		return nil
	}
	b := &pgx.Batch{}
	t.record(b, store.Modified, from)
	if b.Len() == 0 {
		return nil
	}
	if err := t.q.SendBatch(ctx, b).Close(); err != nil {
		delete(t.recorded, from)
		return classify(err)
	}
	return nil
}

func (t *tx) SetMetadata(ctx context.Context, id string, lbls, annotations map[string]string) error {
	ann, err := encodeJSON("annotations", annotations, len(annotations) == 0)
	if err != nil {
		return err
	}
	keys, values := labelArrays(lbls)
	if t.conn.locked[id] {
		// The row is there and locked by this transaction, so the
		// statements cannot fail for want of it: they go out with the
		// transaction's next statement (the change logged first, see
		// the package documentation).
		t.holdRecord(id, "metadata")
		t.holdExec(id, "metadata", qSetAnnotations, id, ann)
		t.holdExec(id, "metadata", qDeleteLabels, id)
		t.holdExec(id, "metadata", qInsertLabels, id, keys, values)
		return nil
	}
	// The change is logged first, so the change-log lock is held before
	// the row changes (see the package documentation).
	b := &pgx.Batch{}
	t.record(b, store.Modified, id)
	logged := b.Len() > 0
	b.Queue(qSetAnnotations, id, ann)
	b.Queue(qDeleteLabels, id)
	b.Queue(qInsertLabels, id, keys, values)
	br := t.q.SendBatch(ctx, b)
	defer br.Close()
	if logged {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("postgres: set metadata of %s: %w", id, classify(err))
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("postgres: set metadata of %s: %w", id, classify(err))
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("postgres: set metadata of %s: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		// The other statements found no row either and did nothing.
		delete(t.recorded, id)
		return notFound(id)
	}
	return nil
}

func (t *tx) SetLockedBy(ctx context.Context, ids []string, owner string) error {
	if len(ids) == 0 {
		return nil
	}
	found, err := t.lockedIDs(ctx, ids)
	if err != nil {
		return fmt.Errorf("postgres: set lock: %w", err)
	}
	if m := missing(ids, found); len(m) > 0 {
		return notFoundIDs(m)
	}
	// The changes are logged first, so the change-log lock is held before
	// the rows change (see the package documentation).
	b := &pgx.Batch{}
	for _, id := range ids {
		t.record(b, store.Modified, id)
	}
	b.Queue(qSetLockedBy, ids, owner)
	if err := t.q.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: set lock: %w", classify(err))
	}
	return nil
}

// lockedIDs locks the rows of ids (in id order) and returns those that exist.
func (t *tx) lockedIDs(ctx context.Context, ids []string) ([]string, error) {
	rows, err := t.q.Query(ctx, qLockInstances, ids)
	if err != nil {
		return nil, classify(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err)
	}
	return found, nil
}

func (t *tx) DeleteInstance(ctx context.Context, id string) error {
	// FOR UPDATE conflicts with the key-share locks AddUses takes, so an
	// edge being added to this instance is committed (and seen below)
	// before the check, and none can be added after it. The change-log lock
	// comes first: a transaction adding such an edge holds it already (it
	// created the instance the edge starts from), and would otherwise wait
	// for our row lock while we waited for the change-log lock.
	var one int
	err := t.q.QueryRow(ctx, qLockForDelete, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("postgres: delete instance %s: %w", id, classify(err))
	}
	rows, err := t.q.Query(ctx, qUsersOf, id)
	if err != nil {
		return fmt.Errorf("postgres: delete instance %s: %w", id, classify(err))
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: delete instance %s: %w", id, classify(err))
	}
	if len(users) > 0 {
		return &cairn.Error{
			Code: cairn.CodeUsedBy,
			Msg:  fmt.Sprintf("instance %q is used by %s", id, cairn.QuoteIDs(users)),
			IDs:  users,
		}
	}
	// Outgoing edges (a self-edge included) first, then the row; versions,
	// labels and attributes go by ON DELETE CASCADE.
	delete(t.conn.locked, id)
	b := &pgx.Batch{}
	t.record(b, store.Deleted, id) // while the row is there to name it
	b.Queue(qDeleteOutgoing, id)
	b.Queue(qDeleteInstance, id)
	if err := t.q.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: delete instance %s: %w", id, classify(err))
	}
	return nil
}

func (t *tx) SetStatus(ctx context.Context, id string, status json.RawMessage) error {
	return t.setColumn(ctx, qSetStatus, "status", id, status)
}

func (t *tx) SetManagedFields(ctx context.Context, id string, fields json.RawMessage) error {
	return t.setColumn(ctx, qSetManaged, "managed fields", id, fields)
}

// setColumn writes one JSON column of an instance row and logs the change,
// the log first (see the package documentation).
func (t *tx) setColumn(ctx context.Context, query, what, id string, raw json.RawMessage) error {
	v, err := encodeRaw(what, raw)
	if err != nil {
		return err
	}
	if t.conn.locked[id] { // as in SetMetadata
		t.holdRecord(id, what)
		t.holdExec(id, what, query, id, v)
		return nil
	}
	b := &pgx.Batch{}
	t.record(b, store.Modified, id)
	logged := b.Len() > 0
	b.Queue(query, id, v)
	br := t.q.SendBatch(ctx, b)
	defer br.Close()
	if logged {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("postgres: set %s of %s: %w", what, id, classify(err))
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("postgres: set %s of %s: %w", what, id, classify(err))
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("postgres: set %s of %s: %w", what, id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		delete(t.recorded, id)
		return notFound(id)
	}
	return nil
}

func (t *tx) RemoveUses(ctx context.Context, from, to string) error {
	if err := t.recordEdgeChange(ctx, from, to, true); err != nil {
		return fmt.Errorf("postgres: remove uses %s -> %s: %w", from, to, err)
	}
	if _, err := t.q.Exec(ctx, qDeleteUses, from, to); err != nil {
		return fmt.Errorf("postgres: remove uses %s -> %s: %w", from, to, classify(err))
	}
	return nil
}
