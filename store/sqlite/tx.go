package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

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
	// Status and managed fields go into the row itself (store.SetCreatedExtras
	// would write them with a statement each).
	status, err := encodeRaw("status", in.Status)
	if err != nil {
		return err
	}
	managed, err := encodeRaw("managed fields", in.ManagedFields)
	if err != nil {
		return err
	}
	// The id's and the name's unique indexes refuse a taken one (only
	// this statement fails; the transaction goes on): the instance that
	// has it is looked up only then, to name it in the error.
	if _, err := t.exec(ctx, qInsertInstance,
		in.ID, in.TypeRef.Path, in.TypeRef.Revision, store.RevisionKey(in.TypeRef.Revision), in.Namespace, in.Name, in.Alias,
		annotations, in.Backend.ID, in.Backend.Abstract, in.LockedBy, createdAt, rv.ResourceVersion, status, managed); err != nil {
		if isUniqueFailure(err) {
			if terr := t.taken(ctx, in); terr != nil {
				return terr
			}
		}
		return fmt.Errorf("sqlite: create instance %s: %w", in.ID, err)
	}
	if err := t.insertVersion(ctx, in.ID, rv); err != nil {
		return err
	}
	if err := t.insertLabels(ctx, in.ID, in.Labels); err != nil {
		return err
	}
	if err := t.insertLatestAttributes(ctx, in.ID, rv.Attributes); err != nil {
		return err
	}
	if _, err := t.execSeq(ctx, qRecordCreate, string(store.Added), in.ID, in.TypeRef.Path, in.TypeRef.Revision,
		in.Namespace, in.Name, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("sqlite: record change of %s: %w", in.ID, err)
	}
	t.markRecorded(in.ID)
	t.created.id, t.created.backend = in.ID, in.Backend.ID
	return nil
}

// taken returns the error for an instance whose id or name another
// instance has, nil when none has.
func (t *tx) taken(ctx context.Context, in cairn.Instance) error {
	var takenID, takenPath, takenNS, takenName string
	err := t.queryRow(ctx, qTakenInstance, in.ID, in.TypeRef.Path, in.Namespace, in.Name).
		Scan(&takenID, &takenPath, &takenNS, &takenName)
	switch {
	case err == nil:
		return store.Taken(in, takenID, takenPath, takenNS, takenName)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlite: create instance %s: %w", in.ID, err)
	}
	return nil
}

// recordChange appends to the change log and stamps the instance with the
// change's Seq, in the transaction of the change itself. A transaction
// records one change per instance (plus its deletion), however many parts
// of it the transaction writes.
func (t *tx) recordChange(ctx context.Context, kind store.ChangeKind, id string) error {
	if kind != store.Deleted && t.wasRecorded(id) {
		return nil
	}
	if _, err := t.execSeq(ctx, qRecordChange, string(kind), time.Now().UnixNano(), id); err != nil {
		return fmt.Errorf("sqlite: record change of %s: %w", id, err)
	}
	if kind == store.Deleted {
		return nil
	}
	if _, err := t.exec(ctx, qSetSeq, id); err != nil {
		return fmt.Errorf("sqlite: record change of %s: %w", id, err)
	}
	t.markRecorded(id)
	return nil
}

// markRecorded notes that the transaction logged a change of id.
func (t *tx) markRecorded(id string) {
	switch {
	case t.recordedOne == "":
		t.recordedOne = id
	case t.recordedOne == id:
	default:
		if t.recorded == nil {
			t.recorded = map[string]bool{}
		}
		t.recorded[id] = true
	}
}

// wasRecorded reports whether the transaction logged a change of id.
func (t *tx) wasRecorded(id string) bool {
	return id != "" && id == t.recordedOne || t.recorded[id]
}

// forgetRecorded forgets the changes logged (the log was cleared).
func (t *tx) forgetRecorded() { t.recordedOne, t.recorded = "", nil }

func (t *tx) PruneChanges(ctx context.Context, through int64) error {
	t.known.forget() // the position may move past the pruned
	if _, err := t.exec(ctx, qPruneChanges, through); err != nil {
		return fmt.Errorf("sqlite: prune changes: %w", err)
	}
	if _, err := t.exec(ctx, qSetPruned, through); err != nil {
		return fmt.Errorf("sqlite: prune changes: %w", err)
	}
	return nil
}

func (t *tx) insertLabels(ctx context.Context, id string, set map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if _, err := t.exec(ctx, qInsertLabel, id, k, set[k]); err != nil {
			return fmt.Errorf("sqlite: label %s of %s: %w", k, id, err)
		}
	}
	return nil
}

// missing returns those of ids that are not instances, in order.
func (t *tx) missing(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	err := t.each(ctx, func(id, _, _ string) { out = append(out, id) }, qMissing, idList(ids))
	return out, err
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

func (t *tx) AddUses(ctx context.Context, from, to string) error {
	// The edge from an instance this write created to its backend has no
	// row (qInsertUses): once the backend was found in this transaction,
	// there is nothing to check. A group's creates with one backend check
	// it once.
	if from == t.created.id && to == t.created.backend && from != to && t.known.isThere(to) {
		return nil
	}
	// The edge's foreign keys refuse a missing end (only that statement
	// fails; the transaction goes on): the ends are looked up only then,
	// to name them.
	n, err := t.exec(ctx, qInsertUses, from, to)
	if err == nil {
		t.known.found(to) // as the foreign key or the backend check did
	}
	if isForeignKeyFailure(err) {
		missing, merr := t.missing(ctx, []string{from, to})
		if merr != nil {
			return fmt.Errorf("sqlite: add uses %s -> %s: %w", from, to, merr)
		}
		if len(missing) > 0 {
			return notFoundIDs(slices.Compact(missing))
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: add uses %s -> %s: %w", from, to, err)
	}
	if n == 0 {
		return nil // the edge was there: nothing changed
	}
	// A new edge changes from (its uses): logged as a change of from, or
	// readers kept current by the log (the watch cache, watches) would not
	// learn of an edge between two instances the transaction does not
	// otherwise change.
	return t.recordChange(ctx, store.Modified, from)
}

func (t *tx) SetMetadata(ctx context.Context, id string, labels, annotations map[string]string) error {
	ann, err := encodeJSON("annotations", annotations, len(annotations) == 0)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, qSetAnnotations, ann, id)
	if err != nil {
		return fmt.Errorf("sqlite: set metadata of %s: %w", id, err)
	}
	if n == 0 {
		return notFound(id)
	}
	if _, err := t.exec(ctx, qDeleteLabels, id); err != nil {
		return fmt.Errorf("sqlite: set metadata of %s: %w", id, err)
	}
	if err := t.insertLabels(ctx, id, labels); err != nil {
		return err
	}
	return t.recordChange(ctx, store.Modified, id)
}

func (t *tx) SetLockedBy(ctx context.Context, ids []string, owner string) error {
	if len(ids) == 0 {
		return nil
	}
	missing, err := t.missing(ctx, ids)
	if err != nil {
		return fmt.Errorf("sqlite: set lock: %w", err)
	}
	if len(missing) > 0 {
		return notFoundIDs(missing)
	}
	if _, err := t.exec(ctx, qSetLockedBy, owner, idList(ids)); err != nil {
		return fmt.Errorf("sqlite: set lock: %w", err)
	}
	for _, id := range ids {
		if err := t.recordChange(ctx, store.Modified, id); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) DeleteInstance(ctx context.Context, id string) error {
	var exists bool
	if err := t.queryRow(ctx, qInstanceExists, id).Scan(&exists); err != nil {
		return fmt.Errorf("sqlite: delete instance %s: %w", id, err)
	}
	if !exists {
		return notFound(id)
	}
	var users []string
	if err := t.each(ctx, func(from, _, _ string) { users = append(users, from) }, qUsersOf, id); err != nil {
		return fmt.Errorf("sqlite: delete instance %s: %w", id, err)
	}
	if len(users) > 0 {
		return &cairn.Error{
			Code: cairn.CodeUsedBy,
			Msg:  fmt.Sprintf("instance %q is used by %s", id, cairn.QuoteIDs(users)),
			IDs:  users,
		}
	}
	if err := t.recordChange(ctx, store.Deleted, id); err != nil {
		return err
	}
	t.known.deleted()
	// Versions, labels, attributes and outgoing edges go by ON DELETE CASCADE.
	if _, err := t.exec(ctx, qDeleteInstance, id); err != nil {
		return fmt.Errorf("sqlite: delete instance %s: %w", id, err)
	}
	return nil
}

func (t *tx) SetStatus(ctx context.Context, id string, status json.RawMessage) error {
	return t.setColumn(ctx, qSetStatus, "status", id, status)
}

func (t *tx) SetManagedFields(ctx context.Context, id string, fields json.RawMessage) error {
	return t.setColumn(ctx, qSetManaged, "managed fields", id, fields)
}

// setColumn writes one JSON column of an instance row and logs the change.
func (t *tx) setColumn(ctx context.Context, query, what, id string, raw json.RawMessage) error {
	v, err := encodeRaw(what, raw)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, query, v, id)
	if err != nil {
		return fmt.Errorf("sqlite: set %s of %s: %w", what, id, err)
	}
	if n == 0 {
		return notFound(id)
	}
	return t.recordChange(ctx, store.Modified, id)
}

func (t *tx) RemoveUses(ctx context.Context, from, to string) error {
	n, err := t.exec(ctx, qDeleteUses, from, to)
	if err != nil {
		return fmt.Errorf("sqlite: remove uses %s -> %s: %w", from, to, err)
	}
	if n == 0 {
		return nil
	}
	return t.recordChange(ctx, store.Modified, from)
}
