package hub

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// DeleteInstance removes an instance and every resource version. It is
// refused while other instances use it (the error lists them) and while it
// is locked by an owner other than ownerID. The built-in backend can never
// be deleted.
//
// The metadata goes first, in one transaction that checks the rules again;
// then an external backend is asked to delete the value. A backend that
// fails (or a process that dies first) leaves the delete in the intent
// journal, and recovery repeats it until it is done; a backend that
// already forgot the instance (NotFound) counts as done.
func (h *Hub) DeleteInstance(ctx context.Context, id, ownerID string) error {
	return h.DeleteInstanceIf(ctx, id, ownerID, 0)
}

// An installation (an instance of a Type a stack registered) that still
// owns children is not deleted at once: the request is recorded
// (AnnotationDeletionRequested) and the stack controller deletes its
// children by deletion priority, then the installation.
//
// DeleteInstanceIf is DeleteInstance that, when ifSeq is not 0, fails with
// CodeConflict unless the instance's last change is still ifSeq.
func (h *Hub) DeleteInstanceIf(ctx context.Context, id, ownerID string, ifSeq int64) error {
	if id == cairn.BuiltinBackendID {
		return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{id},
			Msg: fmt.Sprintf("TypeInstance %q is the hub's built-in storage backend and cannot be deleted", id)}
	}
	if err := refuseHubInstance(id); err != nil {
		return err
	}
	found, err := h.st.GetInstances(ctx, []string{id})
	if err != nil {
		return fmt.Errorf("delete TypeInstance %q: %w", id, err)
	}
	if len(found) == 0 {
		return notFound(id)
	}
	inst := found[0]
	if err := checkDeletable(ctx, h.st, inst, ownerID); err != nil {
		return err
	}
	if err := checkSeq(UpdateInstance{ID: id, IfSeq: ifSeq}, inst); err != nil {
		return err
	}
	if err := h.checkNotInPolicy(ctx, id); err != nil {
		return err
	}
	// An installation with children is deleted by the stack controller,
	// children first (installations.go).
	if pending, err := h.requestDeletion(ctx, inst, ownerID, ifSeq); err != nil || pending {
		return err
	}

	// An external value is deleted once the metadata is: the store decides
	// (locks, users, a racing writer) before anything is lost, and the
	// delete's intent, recorded first, makes recovery finish it should this
	// process die before the backend did it.
	var j *journal
	if !inst.Backend.Abstract && !isDryRun(ctx) {
		b, err := h.newBackendSet().get(ctx, inst.Backend.ID)
		if err != nil {
			return fmt.Errorf("delete TypeInstance %q: %w", id, err)
		}
		// A list racing the delete leaves the instance out (read.go).
		h.deleting.Store(id, struct{}{})
		defer h.deleting.Delete(id)
		w := &externalWrite{b: b, inst: inst,
			w: cairn.BatchWrite{Delete: &cairn.OnDeleteRequest{InstanceID: id, Context: inst.Latest.Context, OwnerID: ownerID}}}
		keys, err := h.recordIntents(ctx, []*externalWrite{w}, false)
		if err != nil {
			return fmt.Errorf("delete TypeInstance %q: %w", id, err)
		}
		j = &journal{intents: keys, later: []*externalWrite{w}}
	}

	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		found, err := tx.GetInstances(ctx, []string{id})
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return notFound(id)
		}
		if err := checkDeletable(ctx, tx, found[0], ownerID); err != nil {
			return err
		}
		if err := checkSeq(UpdateInstance{ID: id, IfSeq: ifSeq}, found[0]); err != nil {
			return err
		}
		if err := tx.DeleteInstance(ctx, id); err != nil {
			return err
		}
		if inst.Backend.Abstract {
			if err := tx.DeleteValues(ctx, id); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return h.undo(ctx, j, err)
	}
	h.settle(ctx, j)
	if h.log.Enabled(ctx, slog.LevelDebug) { // every request is in the audit log too
		h.log.DebugContext(ctx, "deleted instance", "id", id, "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	}
	h.deleteExclusiveDependencies(ctx, inst)
	return nil
}

func notFound(id string) error {
	return &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{id},
		Msg: fmt.Sprintf("TypeInstance %q was not found", id)}
}

func checkDeletable(ctx context.Context, r store.Reader, inst cairn.Instance, ownerID string) error {
	if inst.LockedBy != "" && inst.LockedBy != ownerID {
		return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{inst.ID},
			Msg: fmt.Sprintf("TypeInstance %q is locked by different owner", inst.ID)}
	}
	if len(inst.UsedBy) > 0 {
		return &cairn.Error{Code: cairn.CodeUsedBy, IDs: inst.UsedBy,
			Msg: fmt.Sprintf("TypeInstance %q is used by other TypeInstances, you must first remove %s", inst.ID, namedIDs(ctx, r, inst.UsedBy))}
	}
	return nil
}

// namedIDs quotes ids each with its namespace/name, which is what a user
// deletes them by ("id" (ns/name), ...); an instance that cannot be read
// is left with its id alone, as the error is about the delete, not it.
func namedIDs(ctx context.Context, r store.Reader, ids []string) string {
	found, err := r.GetInstancesBrief(ctx, ids)
	if err != nil {
		return cairn.QuoteIDs(ids)
	}
	names := make(map[string]string, len(found))
	for _, f := range found {
		if f.Name != "" {
			names[f.ID] = f.Namespace + "/" + f.Name
		}
	}
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
		if n := names[id]; n != "" {
			q[i] += " (" + n + ")"
		}
	}
	return strings.Join(q, ", ")
}

// DeleteInstances deletes the instances ids all or none, in one store
// transaction: a Kubernetes deletecollection. The set is refused whole when
// one of them is the built-in backend, one of the hub's own instances or in
// the policy, locked by an owner other than lockOwner, used by an instance
// outside the set, or an installation that still owns children (the stack
// controller deletes those, one installation at a time). Instances of the
// set that use each other go together. Ids that no longer exist are
// skipped: deleted meanwhile, as the API server's collection delete skips
// them. External values are deleted as DeleteOwned deletes them: a backend
// that takes batches first, taken back if the store then fails; any other,
// and one that defers its deletes for this call (cairn.DeleteDeferrer: a
// Git sync's import of removed files, still as one batch), once the store
// committed, the intent journal keeping the delete until it is done.
func (h *Hub) DeleteInstances(ctx context.Context, ids []string, lockOwner string) error {
	for _, id := range ids {
		if id == cairn.BuiltinBackendID {
			return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{id},
				Msg: fmt.Sprintf("TypeInstance %q is the hub's built-in storage backend and cannot be deleted", id)}
		}
		if err := refuseHubInstance(id); err != nil {
			return err
		}
		if err := h.checkNotInPolicy(ctx, id); err != nil {
			return err
		}
	}
	found, err := h.st.GetInstances(ctx, ids)
	if err != nil {
		return fmt.Errorf("delete TypeInstances: %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	ids = make([]string, len(found))
	for i, inst := range found {
		ids[i] = inst.ID
	}
	if err := checkSetDeletable(ctx, h.st, found, lockOwner); err != nil {
		return err
	}
	if err := h.checkNoGrandchildren(ctx, found); err != nil {
		return err
	}
	ws, err := h.externalDeletes(ctx, found, lockOwner)
	if err != nil {
		return err
	}
	j, failed, err := h.writeExternal(ctx, ws)
	if err != nil && failed == nil {
		return h.undo(ctx, j, fmt.Errorf("delete TypeInstances: %w", err))
	}
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return h.undo(ctx, j, h.externalErr(ctx, failed.b.ID, fmt.Sprintf("delete %q", failed.inst.ID), err))
	}
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetInstances(ctx, ids)
		if err != nil {
			return err
		}
		if len(cur) != len(ids) {
			return &cairn.Error{Code: cairn.CodeConflict, IDs: ids,
				Msg: "TypeInstances of the set were deleted meanwhile; list them again"}
		}
		if err := checkSetDeletable(ctx, tx, cur, lockOwner); err != nil {
			return err
		}
		// Users before what they use: an instance goes once nothing
		// left of the set uses it.
		left := map[string]cairn.Instance{}
		for _, inst := range cur {
			left[inst.ID] = inst
		}
		for len(left) > 0 {
			progress := false
			for _, id := range ids {
				inst, ok := left[id]
				if !ok || slices.ContainsFunc(inst.UsedBy, func(u string) bool { _, in := left[u]; return in }) {
					continue
				}
				if err := tx.DeleteInstance(ctx, id); err != nil {
					return err
				}
				if inst.Backend.Abstract {
					if err := tx.DeleteValues(ctx, id); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
						return err
					}
				}
				delete(left, id)
				progress = true
			}
			if !progress {
				return &cairn.Error{Code: cairn.CodeUsedBy, IDs: slices.Sorted(maps.Keys(left)),
					Msg: fmt.Sprintf("TypeInstances %s use each other in a cycle", cairn.QuoteIDs(slices.Sorted(maps.Keys(left))))}
			}
		}
		return nil
	})
	if err != nil {
		return h.undo(ctx, j, fmt.Errorf("delete TypeInstances: %w", err))
	}
	h.settle(ctx, j)
	h.log.InfoContext(ctx, "deleted instances", "count", len(found), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	for _, inst := range found {
		h.deleteExclusiveDependencies(ctx, inst)
	}
	return nil
}

// checkSetDeletable refuses a set of instances to delete together when one
// is locked by an owner other than lockOwner or used by an instance outside
// the set; the error names them.
func checkSetDeletable(ctx context.Context, r store.Reader, set []cairn.Instance, lockOwner string) error {
	in := make(map[string]bool, len(set))
	for _, inst := range set {
		in[inst.ID] = true
	}
	for _, inst := range set {
		if inst.LockedBy != "" && inst.LockedBy != lockOwner {
			return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{inst.ID},
				Msg: fmt.Sprintf("TypeInstance %q (%s) is locked by different owner; nothing was deleted", inst.ID, nsName(inst))}
		}
		var outside []string
		for _, u := range inst.UsedBy {
			if !in[u] {
				outside = append(outside, u)
			}
		}
		if len(outside) > 0 {
			return &cairn.Error{Code: cairn.CodeUsedBy, IDs: outside,
				Msg: fmt.Sprintf("TypeInstance %q (%s) is used by TypeInstances the delete does not include, %s; nothing was deleted", inst.ID, nsName(inst), namedIDs(ctx, r, outside))}
		}
	}
	return nil
}
