package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// UpdateInstance is one instance's update. Nil fields are carried over from
// the latest resource version.
type UpdateInstance struct {
	ID string
	// OwnerID must be the lock owner when the instance is locked.
	OwnerID string
	// CreatedBy defaults to the caller's identity from the context.
	CreatedBy  string
	Value      json.RawMessage
	Context    json.RawMessage
	Attributes *[]cairn.AttributeRef
	// Labels and Annotations, when not nil, replace the instance's.
	Labels      map[string]string
	Annotations map[string]string
	// ManagedFields, when not nil, replaces the instance's server-side
	// apply field ownership.
	ManagedFields json.RawMessage
	// IfSeq, when not 0, makes the update conditional: it fails with
	// CodeConflict unless the instance's last change is still IfSeq
	// (optimistic concurrency, REST's metadata.resourceVersion).
	IfSeq int64
	// Current, when set, is the instance as the caller read it: when its
	// Seq is IfSeq and its value is in the built-in backend, the update is
	// checked against it instead of the instance read again from the store
	// (a read per update fewer). The transaction checks IfSeq, the lock and
	// presence again on what is current then, so an outdated Current fails
	// as an outdated IfSeq does. Current may be a guess
	// (GuessInstanceByName) for the same reason.
	Current *cairn.Instance
}

// maxUpdateAttempts bounds retries when concurrent updates of the same
// instance race for the next resource version.
const maxUpdateAttempts = 20

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errVersionRace marks a lost race for the next resource version; the
// update is retried on the new latest version.
var errVersionRace = errors.New("resource version changed concurrently")

// UpdateInstances adds a resource version (latest + 1) to every instance,
// all or nothing. A locked instance is updated only when the caller gives
// the lock owner; the error lists every missing and every locked id. The
// updated instances are returned in request order without relations (Uses
// and UsedBy are nil; GetInstance has them); the Latest.Value of one is the
// value stored when its backend accepts values (the built-in one included),
// nil when the backend derives it.
func (h *Hub) UpdateInstances(ctx context.Context, ups []UpdateInstance) ([]cairn.Instance, error) {
	return h.updateInstances(ctx, ups, "")
}

// updateInstances is UpdateInstances that may also write own, the id of an
// instance the hub keeps for itself (refuseHubInstance): the caller is that
// instance's own API, which validated the value.
func (h *Hub) updateInstances(ctx context.Context, ups []UpdateInstance, own string) ([]cairn.Instance, error) {
	if err := checkUpdates(ups, own); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		out, err := h.updateOnce(ctx, ups)
		if errors.Is(err, errVersionRace) && attempt < maxUpdateAttempts {
			ups = withoutCurrent(ups)
			// Only updates in external backends race (they are given a
			// revision number before the commit); back off with jitter so
			// the writers spread out.
			if err := sleep(ctx, time.Duration(1+rand.IntN(attempt*2))*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, errVersionRace) {
			return nil, &cairn.Error{Code: cairn.CodeConflict, Err: err,
				Msg: fmt.Sprintf("failed to update TypeInstances: gave up after %d attempts: %v", attempt, err)}
		}
		return out, err
	}
}

// withoutCurrent returns ups without what callers read: a retry reads
// the instances again.
func withoutCurrent(ups []UpdateInstance) []UpdateInstance {
	out := slices.Clone(ups)
	for i := range out {
		out[i].Current = nil
	}
	return out
}

// usableCurrent reports whether staging may check u against u.Current.
func usableCurrent(u UpdateInstance) bool {
	c := u.Current
	return c != nil && u.IfSeq != 0 && c.ID == u.ID && c.Seq == u.IfSeq && c.Backend.Abstract
}

// checkUpdates checks ups before anything is read; own is the one
// instance the hub keeps for itself that they may write ("": none).
func checkUpdates(ups []UpdateInstance, own string) error {
	if len(ups) == 0 {
		return cairn.Errorf(cairn.CodeInvalid, "no TypeInstances to update")
	}
	var errs []error
	seen := map[string]bool{}
	for i := range ups {
		u := &ups[i]
		subject := subjectOf(u.ID)
		var causes []cairn.Cause
		if u.ID == "" {
			causes = append(causes, cairn.Cause{Field: fmt.Sprintf("[%d]/id", i), Message: "is required"})
		} else if seen[u.ID] {
			causes = append(causes, cairn.Cause{Field: fmt.Sprintf("[%d]/id", i), Message: "appears more than once in the batch"})
		}
		seen[u.ID] = true
		if u.ID != own {
			if err := refuseHubInstance(u.ID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := labels.Validate(u.Labels); err != nil {
			causes = append(causes, cairn.Cause{Field: "metadata/labels", Message: err.Error()})
		}
		if u.Attributes != nil {
			causes = append(causes, checkAttributes(*u.Attributes)...)
		}
		if u.Value != nil {
			v, err := compactJSON(u.Value)
			if err != nil {
				causes = append(causes, cairn.Cause{Field: "spec/value", Message: "must be valid JSON: " + err.Error()})
			}
			u.Value = v
		}
		if u.Context != nil {
			c, err := compactJSON(u.Context)
			if err != nil {
				causes = append(causes, cairn.Cause{Field: "backend/context", Message: "must be valid JSON: " + err.Error()})
			}
			u.Context = c
		}
		if err := invalid(subject, "invalid update", causes); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// staged is one instance's update between the backend call and the commit.
type staged struct {
	up      UpdateInstance
	inst    cairn.Instance
	rv      cairn.ResourceVersion
	value   json.RawMessage
	backend *resolvedBackend
	// pinType: the value was checked against checkedType (nil: the Type
	// was not registered), for the transaction to pin (updatetypes.go).
	pinType     bool
	checkedType *keptType
}

func (h *Hub) updateOnce(ctx context.Context, ups []UpdateInstance) ([]cairn.Instance, error) {
	ids, items, err := h.stageUpdates(ctx, ups)
	if err != nil {
		return nil, err
	}
	// The state protocol writes states and outputs with stageUpdates of
	// its own (terraform.go); a generic update may not write what it keeps.
	var refused []error
	for _, it := range items {
		if err := refuseTerraformUpdate(it.up, it.inst); err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) > 0 {
		return nil, errors.Join(refused...)
	}
	j, failed, err := h.writeExternal(ctx, updateWrites(items))
	if err != nil {
		if failed == nil { // the intent journal, before any backend call
			return nil, h.undo(ctx, j, err)
		}
		return nil, h.undo(ctx, j, h.updateFailure(ctx, failed, err))
	}

	var (
		out []cairn.Instance
		// The transaction logs one change of each instance it updates
		// (its new resource version; metadata and managed fields of the
		// same instance log no second one) and no other, at the Seq out
		// holds: told to the kept backends as a create tells its own, and
		// handed to the read cache, by the store right after the commit
		// when it can (told), before most readers learn of the commit. An
		// update staged meanwhile then resolves its backend without reading
		// the change log, and a consistent read applies these changes
		// without reading the rows back.
		tell = !isDryRun(ctx)
		told bool
	)
	err = h.writeHanded(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = h.storeUpdates(ctx, tx, ups, ids, items)
		if err != nil {
			return err
		}
		fillValues(out, items)
		if a, ok := tx.(store.AfterCommitter); ok && tell {
			updated := out
			told = a.AfterCommit(func() {
				h.kept.committed(updated)
				h.committed(ctx, updated)
			})
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errVersionRace) && !isHubRefusal(err) && !isTypeRefusal(err) {
			err = fmt.Errorf("failed to update TypeInstances: %w", err)
		}
		return nil, h.undo(ctx, j, err)
	}
	if tell && !told {
		h.kept.committed(out)
		h.committed(ctx, out)
	}
	h.settle(ctx, j)
	if h.log.Enabled(ctx, slog.LevelDebug) { // every request is in the audit log too
		h.log.DebugContext(ctx, "updated instances", "count", len(out), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	}
	return withSentValues(out, items), nil
}

// withSentValues is out, the instances staged items updated, with the value
// sent to each external backend that accepts values, as CreateInstances
// answers. The caller need not read back what it wrote: that read, once
// the write committed, could fail with the backend gone and make the
// committed write look refused. A copy: the read cache keeps out, and
// keeps no external values.
func withSentValues(out []cairn.Instance, items []*staged) []cairn.Instance {
	res := slices.Clone(out)
	for i, s := range items {
		if !s.inst.Backend.Abstract && s.backend.AcceptValue && s.value != nil && i < len(res) && res[i].ID == s.inst.ID {
			res[i].Latest.Value = s.value
		}
	}
	return res
}

// stageUpdates reads the instances to update, checks every update against
// them (lock owner, IfSeq, the value against the Type and the backend)
// and prepares each new resource version, reporting every refusal.
func (h *Hub) stageUpdates(ctx context.Context, ups []UpdateInstance) ([]string, []*staged, error) {
	ids := make([]string, len(ups))
	var found []cairn.Instance
	var read []string
	for i, u := range ups {
		ids[i] = u.ID
		if usableCurrent(u) {
			found = append(found, *u.Current)
		} else {
			read = append(read, u.ID)
		}
	}
	if len(read) > 0 {
		more, err := h.st.GetInstancesBrief(ctx, read)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to update TypeInstances: %w", err)
		}
		found = append(found, more...)
	}
	if err := checkPresentAndOwned(ups, found, "update"); err != nil {
		return nil, nil, err
	}
	byID := make(map[string]cairn.Instance, len(found))
	for _, f := range found {
		byID[f.ID] = f
	}
	for _, u := range ups {
		if err := checkSeq(u, byID[u.ID]); err != nil {
			return nil, nil, err
		}
	}

	// Microseconds are what both stores keep of a time (PostgreSQL's
	// timestamptz), so the instance storeUpdates assembles is the one a
	// read of the store gives.
	now := h.now().UTC().Truncate(time.Microsecond)
	actor := cairn.Actor(ctx)
	bs := h.newBackendSet()
	items := make([]*staged, len(ups))
	var errs []error
	for i, u := range ups {
		inst := byID[u.ID]
		subject := subjectOf(u.ID)
		if isStorage(inst.Latest.Attributes) || (u.Attributes != nil && isStorage(*u.Attributes)) {
			if err := h.mayWriteBackend(ctx, "update", subject, u.ID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		var (
			pinType     bool
			checkedType *keptType
		)
		b, err := bs.get(ctx, inst.Backend.ID)
		if err != nil {
			errs = append(errs, withSubject(err, subject))
			continue
		}
		if u.Value != nil {
			if err := b.checkValueAllowed(); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
			if pinType, checkedType, err = h.checkUpdateValue(ctx, subject, inst.TypeRef, u.Value); err != nil {
				errs = append(errs, err)
				continue
			}
			attrs := inst.Latest.Attributes
			if u.Attributes != nil {
				attrs = *u.Attributes
			}
			if err := checkStorageValue(subject, attrs, u.Value); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := h.checkBackendConfig(ctx, subject, inst.TypeRef, attrs, u.Value); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if u.Context != nil && !(h.capact && b.Abstract) {
			// Capact's Local Hub stores a context given to an instance of
			// its built-in backend; cairn refuses it unless asked to
			// behave the same.
			if err := b.checkContext(u.Context); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
			if err := h.checkProjectionUpdate(ctx, b, inst, u.Context); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
		}
		if u.Annotations != nil {
			if u.Annotations, err = h.StoredAnnotations(ctx, inst.TypeRef, u.Annotations); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
			if err := h.checkDependencyAnnotations(ctx, inst.Namespace, inst.Annotations, u.Annotations); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
			// Another stack version may put children elsewhere.
			if v := u.Annotations[AnnotationStackVersion]; inst.Namespace == "" && v != inst.Annotations[AnnotationStackVersion] {
				if err := h.checkClusterChildren(ctx, inst.TypeRef, inst.Name, v); err != nil {
					errs = append(errs, withSubject(err, subject))
					continue
				}
			}
		}
		s := &staged{up: u, inst: inst, backend: b, value: u.Value, pinType: pinType, checkedType: checkedType}
		// Abstract values are carried over inside the transaction, from the
		// version that is latest at commit time; external ones must be read
		// now because the backend is called before the transaction.
		if s.value == nil && b.AcceptValue && !inst.Backend.Abstract {
			if s.value, err = h.readValue(ctx, bs, inst, inst.Latest); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
		}
		s.rv = cairn.ResourceVersion{
			ResourceVersion: inst.Latest.ResourceVersion + 1,
			CreatedBy:       u.CreatedBy,
			CreatedAt:       now,
			Attributes:      inst.Latest.Attributes,
			Context:         inst.Latest.Context,
		}
		if s.rv.CreatedBy == "" {
			s.rv.CreatedBy = actor
		}
		if u.Attributes != nil {
			s.rv.Attributes = *u.Attributes
		}
		if u.Context != nil {
			s.rv.Context = u.Context
		}
		items[i] = s
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("failed to update TypeInstances: %w", errors.Join(errs...))
	}
	return ids, items, nil
}

// updateWrites are the external writes of staged updates: one OnUpdate
// per instance not in the built-in backend.
func updateWrites(items []*staged) []*externalWrite {
	var ws []*externalWrite
	for _, s := range items {
		if s.inst.Backend.Abstract {
			continue
		}
		req := cairn.OnUpdateRequest{
			InstanceID:         s.inst.ID,
			NewResourceVersion: s.rv.ResourceVersion,
			Context:            s.rv.Context,
			OwnerID:            s.up.OwnerID,
		}
		if s.backend.AcceptValue {
			req.NewValue = s.value
		}
		ws = append(ws, &externalWrite{b: s.backend, inst: s.inst, w: cairn.BatchWrite{Update: &req},
			done: func(newCtx json.RawMessage) {
				if newCtx != nil {
					s.rv.Context = newCtx
				}
			}})
	}
	return ws
}

// updateFailure is the error of a failed external update; a resource
// version another writer took first makes it a race, retried.
func (h *Hub) updateFailure(ctx context.Context, failed *externalWrite, err error) error {
	err = withSubject(h.externalErr(ctx, failed.b.ID, "update", err), subjectOf(failed.inst.ID))
	if cairn.HasCode(err, cairn.CodeAlreadyExists) {
		err = fmt.Errorf("%w: %w", errVersionRace, err)
	}
	return err
}

// fillValues fills in out, the instances staged items updated, each
// built-in value: written, or carried over, in the transaction itself, the
// caller gets it without reading it back.
func fillValues(out []cairn.Instance, items []*staged) {
	for i, s := range items {
		if s.inst.Backend.Abstract && i < len(out) && out[i].ID == s.inst.ID {
			out[i].Latest.Value = s.value
		}
	}
}

// storeUpdates writes staged updates in tx, checking again that every
// instance is there, unlocked (or locked by the caller) and unchanged
// since it was staged, and every value against its Type as stored now
// (pinUpdateTypes), and returns the updated instances.
func (h *Hub) storeUpdates(ctx context.Context, tx store.Tx, ups []UpdateInstance, ids []string, items []*staged) ([]cairn.Instance, error) {
	current, err := tx.GetInstancesBrief(ctx, ids)
	if err != nil {
		return nil, err
	}
	if err := checkPresentAndOwned(ups, current, "update"); err != nil {
		return nil, err
	}
	for i, c := range current {
		s := items[i]
		if err := checkSeq(s.up, c); err != nil {
			return nil, err
		}
		if !s.inst.Backend.Abstract {
			// The backend already stored this revision number.
			if c.Latest.ResourceVersion != s.inst.Latest.ResourceVersion {
				return nil, errVersionRace
			}
			continue
		}
		// Built-in values are written in this transaction, so the
		// version is based on what is latest now and never races.
		if err := rebase(ctx, tx, s, c); err != nil {
			return nil, err
		}
	}
	if err := h.pinUpdateTypes(ctx, tx, items); err != nil {
		return nil, err
	}
	for i, s := range items {
		if err := tx.AddResourceVersion(ctx, s.inst.ID, s.rv); err != nil {
			if cairn.HasCode(err, cairn.CodeConflict) {
				return nil, fmt.Errorf("%w: %w", errVersionRace, err)
			}
			return nil, err
		}
		if s.inst.Backend.Abstract {
			if err := tx.PutValue(ctx, s.inst.ID, s.rv.ResourceVersion, s.value); err != nil {
				if cairn.HasCode(err, cairn.CodeAlreadyExists) {
					return nil, fmt.Errorf("%w: %w", errVersionRace, err)
				}
				return nil, err
			}
		}
		// Labels, annotations and managed fields the update gives as they
		// are now (a REST update always gives them) are not written again.
		c := current[i]
		if s.up.Labels != nil || s.up.Annotations != nil {
			l, a := s.inst.Labels, s.inst.Annotations
			if s.up.Labels != nil {
				l = maps.Clone(s.up.Labels)
			}
			if s.up.Annotations != nil {
				a = maps.Clone(s.up.Annotations)
			}
			if !maps.Equal(l, c.Labels) || !maps.Equal(a, c.Annotations) {
				if err := tx.SetMetadata(ctx, s.inst.ID, l, a); err != nil {
					return nil, err
				}
			}
		}
		if s.up.ManagedFields != nil && !bytes.Equal(s.up.ManagedFields, c.ManagedFields) {
			if err := tx.SetManagedFields(ctx, s.inst.ID, s.up.ManagedFields); err != nil {
				return nil, err
			}
		}
	}
	// The caller gets what this transaction wrote: after the commit
	// another writer's version may already be the latest, and the caller
	// must get its own (REST serves its Seq as the resourceVersion to
	// update from). One instance is assembled from the row read above and
	// what was written to it; its change is the newest this transaction
	// sees (the store's LastSeq through a Tx). A batch is read back.
	if len(items) == 1 {
		seq, err := tx.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the change of %q: %w", items[0].inst.ID, err)
		}
		return []cairn.Instance{updatedForm(items[0], current[0], seq)}, nil
	}
	return tx.GetInstancesBrief(ctx, ids)
}

// updatedForm is instance cur, as the update's transaction read it before
// writing s, after the writes: what a read of the store gives (empty maps
// and lists as nil, raw JSON compacted, no relations, no value), with the
// change number seq.
func updatedForm(s *staged, cur cairn.Instance, seq int64) cairn.Instance {
	inst := cur
	inst.Seq = seq
	if s.up.Labels != nil {
		inst.Labels = storedMap(s.up.Labels)
	}
	if s.up.Annotations != nil {
		inst.Annotations = storedMap(s.up.Annotations)
	}
	if s.up.ManagedFields != nil {
		inst.ManagedFields = compactRaw(s.up.ManagedFields)
	}
	inst.Latest = cairn.ResourceVersion{
		ResourceVersion: s.rv.ResourceVersion,
		CreatedBy:       s.rv.CreatedBy,
		CreatedAt:       s.rv.CreatedAt,
		Context:         compactRaw(s.rv.Context),
	}
	if len(s.rv.Attributes) > 0 {
		inst.Latest.Attributes = slices.Clone(s.rv.Attributes)
	}
	inst.Uses, inst.UsedBy = nil, nil
	return inst
}

// storedMap is m as the store reads it back: a copy, nil when empty.
func storedMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// committed hands the read cache the instances a write of this hub
// committed, as its transaction read them after writing (relations
// unchanged, the built-in value filled), so that it need not read them
// back. A dry run committed nothing.
func (h *Hub) committed(ctx context.Context, insts []cairn.Instance) {
	if h.cache != nil && !isDryRun(ctx) {
		h.cache.Committed(insts)
	}
}

// rebase bases an abstract-backend update on the instance's current latest
// version: its number + 1, and whatever the update leaves out carried over
// from it.
func rebase(ctx context.Context, tx store.Tx, s *staged, cur cairn.Instance) error {
	s.inst = cur
	s.rv.ResourceVersion = cur.Latest.ResourceVersion + 1
	if s.up.Attributes == nil {
		s.rv.Attributes = cur.Latest.Attributes
	}
	if s.up.Context == nil {
		s.rv.Context = cur.Latest.Context
	}
	if s.up.Value != nil {
		return nil
	}
	v, err := tx.Value(ctx, cur.ID, cur.Latest.ResourceVersion)
	if err != nil {
		return fmt.Errorf("carry over the value of %q version %d: %w", cur.ID, cur.Latest.ResourceVersion, err)
	}
	s.value = v
	return nil
}

// checkSeq enforces UpdateInstance.IfSeq.
func checkSeq(u UpdateInstance, cur cairn.Instance) error {
	if u.IfSeq == 0 || cur.Seq == u.IfSeq {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeConflict, IDs: []string{u.ID},
		Msg: fmt.Sprintf("TypeInstance %q was changed since it was read (resourceVersion %d, now %d); read it again and retry", u.ID, u.IfSeq, cur.Seq)}
}

// isHubRefusal reports whether err is one of the hub's own not-found or
// locked refusals, which already carry the operation in their message.
func isHubRefusal(err error) bool {
	c := cairn.ErrorCode(err)
	return c == cairn.CodeNotFound || c == cairn.CodeLocked || c == cairn.CodeConflict
}

// checkPresentAndOwned returns the errors clients match for an update, lock
// or delete: every missing id, and every id locked by a different owner.
func checkPresentAndOwned(ups []UpdateInstance, found []cairn.Instance, op string) error {
	byID := make(map[string]cairn.Instance, len(found))
	for _, f := range found {
		byID[f.ID] = f
	}
	var missing, locked []string
	for _, u := range ups {
		inst, ok := byID[u.ID]
		switch {
		case !ok:
			missing = append(missing, u.ID)
		case inst.LockedBy != "" && inst.LockedBy != u.OwnerID:
			locked = append(locked, u.ID)
		}
	}
	return batchRefusal(op, missing, locked)
}

func batchRefusal(op string, missing, locked []string) error {
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, &cairn.Error{Code: cairn.CodeNotFound, IDs: missing,
			Msg: fmt.Sprintf("TypeInstances with IDs %s were not found", cairn.QuoteIDs(missing))})
	}
	if len(locked) > 0 {
		errs = append(errs, &cairn.Error{Code: cairn.CodeLocked, IDs: locked,
			Msg: fmt.Sprintf("TypeInstances with IDs %s are locked by different owner", cairn.QuoteIDs(locked))})
	}
	if len(errs) == 0 {
		return nil
	}
	return &opError{op: op, err: errors.Join(errs...)}
}

// opError prefixes a batch refusal with the operation ("failed to update
// TypeInstances: ...") while keeping every *cairn.Error reachable.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return fmt.Sprintf("failed to %s TypeInstances: %s", e.op, e.err)
}

func (e *opError) Unwrap() error { return e.err }
