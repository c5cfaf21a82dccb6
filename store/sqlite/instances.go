package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// scanInstance reads instanceColumns, and into extra the columns after them.
func scanInstance(sc interface{ Scan(...any) error }, extra ...any) (cairn.Instance, error) {
	var (
		in                            cairn.Instance
		annotations, attrs, rvContext sql.NullString
		status, managed               sql.NullString
		createdAt, rvCreatedAt        sql.NullInt64
	)
	if err := sc.Scan(append([]any{&in.ID, &in.TypeRef.Path, &in.TypeRef.Revision, &in.Namespace, &in.Name, &in.Alias, &annotations,
		&in.Backend.ID, &in.Backend.Abstract, &in.LockedBy, &createdAt, &in.Seq, &status, &managed,
		&in.Latest.ResourceVersion, &in.Latest.CreatedBy, &rvCreatedAt, &attrs, &rvContext}, extra...)...); err != nil {
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
	in.Uses, in.UsedBy = []string{}, []string{}
	return in, nil
}

// queryInstances runs one instance query and fills labels, and with
// relations uses and usedBy, for all of its rows with up to three more
// queries, however many rows there are.
func (r reader) queryInstances(ctx context.Context, relations bool, query string, args ...any) ([]cairn.Instance, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cairn.Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if len(out) == 0 {
		return out, nil
	}

	byID := make(map[string]*cairn.Instance, len(out))
	ids := make([]string, len(out))
	for i := range out {
		byID[out[i].ID] = &out[i]
		ids[i] = out[i].ID
	}
	addLabel := func(id, key, value string) {
		in := byID[id]
		if in.Labels == nil {
			in.Labels = make(map[string]string)
		}
		in.Labels[key] = value
	}
	if err := r.each(ctx, addLabel, qLabelsOf, idList(ids)); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	if !relations {
		for i := range out {
			out[i].Uses, out[i].UsedBy = nil, nil
		}
		return out, nil
	}
	list := idList(ids)
	// Edges come out in the order Instance.Uses documents: by the other
	// end's type path, revision descending, createdAt descending.
	err = r.each(ctx, func(from, to, _ string) {
		in := byID[from]
		in.Uses = append(in.Uses, to)
	}, qUsesOf, list)
	if err != nil {
		return nil, fmt.Errorf("uses: %w", err)
	}
	err = r.each(ctx, func(to, from, _ string) {
		in := byID[to]
		in.UsedBy = append(in.UsedBy, from)
	}, qUsedByOf, list)
	if err != nil {
		return nil, fmt.Errorf("used by: %w", err)
	}
	return out, nil
}

func (r reader) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return r.getInstances(ctx, ids, true)
}

func (r reader) GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return r.getInstances(ctx, ids, false)
}

func (r reader) getInstances(ctx context.Context, ids []string, relations bool) ([]cairn.Instance, error) {
	switch len(ids) {
	case 0:
		return nil, nil
	case 1:
		q := qOneBriefByID
		if relations {
			q = qOneByID
		}
		in, ok, err := r.getOne(ctx, relations, q, ids[0])
		if err != nil || !ok {
			return nil, err
		}
		return []cairn.Instance{in}, nil
	}
	found, err := r.queryInstances(ctx, relations, qInstancesByID, idList(ids))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get instances: %w", err)
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

// getOne reads one instance with one of the qOne statements; ok is false
// when there is none.
func (r reader) getOne(ctx context.Context, relations bool, q string, args ...any) (in cairn.Instance, ok bool, err error) {
	var labels, uses, usedBy sql.NullString
	in, err = scanInstance(r.queryRow(ctx, q, args...), &labels, &uses, &usedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return cairn.Instance{}, false, nil
	}
	if err != nil {
		return cairn.Instance{}, false, fmt.Errorf("sqlite: get instance: %w", err)
	}
	if labels.Valid && labels.String != "{}" {
		if err := json.Unmarshal([]byte(labels.String), &in.Labels); err != nil {
			return cairn.Instance{}, false, fmt.Errorf("sqlite: labels of %s: %w", in.ID, err)
		}
	}
	if !relations {
		in.Uses, in.UsedBy = nil, nil
		return in, true, nil
	}
	for _, rel := range []struct {
		col sql.NullString
		to  *[]string
	}{{uses, &in.Uses}, {usedBy, &in.UsedBy}} {
		if err := json.Unmarshal([]byte(rel.col.String), rel.to); err != nil {
			return cairn.Instance{}, false, fmt.Errorf("sqlite: relations of %s: %w", in.ID, err)
		}
	}
	return in, true, nil
}

func (r reader) GetInstanceByName(ctx context.Context, typePath, namespace, name string) (cairn.Instance, error) {
	in, ok, err := r.getOne(ctx, true, qOneByName, typePath, namespace, name)
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("sqlite: get instance %s/%s/%s: %w", typePath, namespace, name, err)
	}
	if !ok {
		return cairn.Instance{}, cairn.Errorf(cairn.CodeNotFound, "instance %q not found", typePath+"/"+namespace+"/"+name)
	}
	return in, nil
}

func (r reader) ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error) {
	q, args, err := listQuery(f)
	if err != nil {
		return nil, err
	}
	out, err := r.queryInstances(ctx, true, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list instances: %w", err)
	}
	return out, nil
}

// listQuery is the query of ListInstances.
func listQuery(f store.InstanceFilter) (string, []any, error) {
	where, args, err := instanceWhere(f)
	if err != nil {
		return "", nil, err
	}
	q := qListInstanceAll
	if where != "" || f.Order != store.ByType {
		q = instanceSelect
		if where != "" {
			q += ` WHERE ` + where
		}
		q += orderBy(f.Order)
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args, nil
}

// orderBy is the ORDER BY clause of a list in order o.
func orderBy(o store.InstanceOrder) string {
	switch o {
	case store.ByName:
		return nameOrder
	case store.ByID:
		return idOrder
	}
	return instanceOrder
}

// instanceWhere builds one WHERE clause (without the keyword) for f.
func instanceWhere(f store.InstanceFilter) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.TypePath != "" {
		if p, ok := strings.CutSuffix(f.TypePath, ".*"); ok {
			add(`(i.type_path >= ? AND i.type_path < ?)`, p+".", p+"/") // prefix "p." as a range, see ListTypes
		} else {
			add(`i.type_path = ?`, f.TypePath)
		}
	}
	if f.TypeRevision != "" {
		add(`i.type_revision = ?`, f.TypeRevision)
	}
	if f.Namespace != "" {
		add(`i.namespace = ?`, f.Namespace)
	}
	if f.Name != "" {
		add(`i.name = ?`, f.Name)
	}
	if f.ID != "" {
		add(`i.id = ?`, f.ID)
	}
	if f.CreatedBy != "" {
		add(`v.created_by = ?`, f.CreatedBy)
	}
	if f.BackendID != "" {
		add(`i.backend_id = ?`, f.BackendID)
	}
	for _, a := range f.Attributes {
		cond := `EXISTS (SELECT 1 FROM latest_attributes a WHERE a.instance_id = i.id AND a.path = ?`
		args = append(args, a.Path)
		if a.Revision != "" {
			cond += ` AND a.revision = ?`
			args = append(args, a.Revision)
		}
		cond += `)`
		if a.Exclude {
			cond = `NOT ` + cond
		}
		where = append(where, cond)
	}
	for _, req := range f.Labels {
		cond, a, err := labelCond(req)
		if err != nil {
			return "", nil, err
		}
		add(cond, a...)
	}
	if k := f.After; k != nil && f.Order == store.ByName {
		// One type path: a range of the UNIQUE (type_path, namespace,
		// name) index.
		switch {
		case f.TypePath == k.TypeRef.Path && f.Namespace != "" && f.Namespace == k.Namespace:
			add(`i.name > ?`, k.Name)
		case f.TypePath == k.TypeRef.Path:
			add(`(i.namespace, i.name) > (?, ?)`, k.Namespace, k.Name)
		default:
			add(`(i.namespace, i.name, i.type_path) > (?, ?, ?)`, k.Namespace, k.Name, k.TypeRef.Path)
		}
	} else if k != nil && f.Order == store.ByID {
		add(`i.id > ?`, k.ID)
	} else if k != nil {
		// Rows after k in instanceOrder: path ascending, revision
		// descending, createdAt descending, id ascending.
		created, err := encodeTime(k.CreatedAt)
		if err != nil {
			return "", nil, err
		}
		rk := store.RevisionKey(k.TypeRef.Revision)
		p, r := k.TypeRef.Path, k.TypeRef.Revision
		add(`(i.type_path > ?
 OR (i.type_path = ? AND i.type_revision_key < ?)
 OR (i.type_path = ? AND i.type_revision_key = ? AND i.type_revision < ?)
 OR (i.type_path = ? AND i.type_revision_key = ? AND i.type_revision = ? AND i.created_at < ?)
 OR (i.type_path = ? AND i.type_revision_key = ? AND i.type_revision = ? AND i.created_at = ? AND i.id > ?))`,
			p, p, rk, p, rk, r, p, rk, r, created, p, rk, r, created, k.ID)
	}
	return strings.Join(where, ` AND `), args, nil
}

// labelCond renders one requirement as an EXISTS or NOT EXISTS subquery,
// with the Kubernetes semantics of labels.Requirement.Matches.
func labelCond(r labels.Requirement) (string, []any, error) {
	const exists = `EXISTS (SELECT 1 FROM instance_labels l WHERE l.instance_id = i.id AND l.key = ?`
	args := []any{r.Key}
	var in string
	if r.Operator == labels.In || r.Operator == labels.NotIn {
		if len(r.Values) == 0 {
			// "in ()" matches nothing and "notin ()" everything.
			if r.Operator == labels.In {
				return `0`, nil, nil
			}
			return `1`, nil, nil
		}
		in = ` AND l.value IN (?` + strings.Repeat(`, ?`, len(r.Values)-1) + `)`
		for _, v := range r.Values {
			args = append(args, v)
		}
	}
	single := func() error {
		if len(r.Values) != 1 {
			return cairn.Errorf(cairn.CodeInvalid, "label selector on key %q: operator %q takes exactly one value", r.Key, r.Operator)
		}
		args = append(args, r.Values[0])
		return nil
	}
	switch r.Operator {
	case labels.Equals:
		if err := single(); err != nil {
			return "", nil, err
		}
		return exists + ` AND l.value = ?)`, args, nil
	case labels.NotEquals:
		if err := single(); err != nil {
			return "", nil, err
		}
		return `NOT ` + exists + ` AND l.value = ?)`, args, nil
	case labels.In:
		return exists + in + `)`, args, nil
	case labels.NotIn:
		return `NOT ` + exists + in + `)`, args, nil
	case labels.Exists:
		return exists + `)`, args, nil
	case labels.DoesNotExist:
		return `NOT ` + exists + `)`, args, nil
	}
	return "", nil, cairn.Errorf(cairn.CodeInvalid, "label selector: unknown operator %q for key %q", r.Operator, r.Key)
}

func (r reader) CountInstances(ctx context.Context, ref cairn.TypeRef) (int, error) {
	var n int
	err := r.queryRow(ctx, qCountInstance, ref.Path, ref.Revision).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: count instances of %s: %w", ref, err)
	}
	return n, nil
}
