package hub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// ChildChanges is what one reconcile of an installation changes among its
// children: instances to create (each owned by the installation through a
// uses edge from it), to update and to delete.
type ChildChanges struct {
	Create []NewInstance
	Update []UpdateInstance
	// Delete lists children by id; each loses the owner's uses edge and is
	// deleted, refused while it is locked or used by anything but the
	// owner (as DeleteOwned).
	Delete []string
}

// Empty reports whether there is nothing to change.
func (c ChildChanges) Empty() bool {
	return len(c.Create)+len(c.Update)+len(c.Delete) == 0
}

// ChildrenApplied is what ApplyChildren did.
type ChildrenApplied struct {
	Created []Created
	Updated []cairn.Instance
	Deleted []string
}

// ApplyChildren makes every change of ch to the children of the
// installation ownerID as one unit: one store transaction holds every
// create, new resource version and delete, and each external backend gets
// its whole share as one write, creates, updates and deletes mixed, where
// it takes batches (cairn.BatchWriter): a Git backend makes one commit of
// a reconcile, or one pull request in propose mode. Everything is checked
// before anything is written; when a write fails halfway, what was
// written is taken back (the store transaction rolled back, each
// backend's batch undone: a Git backend pushes one commit restoring the
// files), and the error says what failed and anything the undo could not
// do. Backends without batches get one call per write, deletes last: a
// delete there cannot be taken back, so only a failure of the store
// transaction after it leaves the value deleted with its metadata in
// place (the error names it; applying again finishes it).
func (h *Hub) ApplyChildren(ctx context.Context, ownerID string, ch ChildChanges) (ChildrenApplied, error) {
	if ch.Empty() {
		return ChildrenApplied{}, nil
	}
	if err := checkChildChanges(ch); err != nil {
		return ChildrenApplied{}, err
	}
	for attempt := 1; ; attempt++ {
		out, err := h.applyChildrenOnce(ctx, ownerID, ch)
		if errors.Is(err, errVersionRace) && attempt < maxUpdateAttempts {
			if err := sleep(ctx, time.Duration(1+rand.IntN(attempt*2))*time.Millisecond); err != nil {
				return ChildrenApplied{}, err
			}
			continue
		}
		if errors.Is(err, errVersionRace) {
			return ChildrenApplied{}, &cairn.Error{Code: cairn.CodeConflict, Err: err,
				Msg: fmt.Sprintf("failed to apply the children of %q: gave up after %d attempts: %v", ownerID, attempt, err)}
		}
		return out, err
	}
}

// ApplyChanges makes the creates and updates of ch, instances no
// installation owns, as one unit, as ApplyChildren makes an installation's:
// everything is checked before anything is written, one store transaction
// holds every create and new resource version, and each external backend
// that takes batches gets its whole share as one write (a Git backend: one
// commit). A failure halfway takes back what was written. Git sync imports
// the files of one pushed commit with it. Deletes are refused here: they
// are DeleteInstances'.
func (h *Hub) ApplyChanges(ctx context.Context, ch ChildChanges) (ChildrenApplied, error) {
	if len(ch.Delete) > 0 {
		return ChildrenApplied{}, cairn.Errorf(cairn.CodeInvalid, "ApplyChanges creates and updates; delete with DeleteInstances")
	}
	return h.ApplyChildren(ctx, "", ch)
}

func checkChildChanges(ch ChildChanges) error {
	if len(ch.Update) > 0 {
		if err := checkUpdates(ch.Update, ""); err != nil {
			return err
		}
	}
	updated := map[string]bool{}
	for _, u := range ch.Update {
		updated[u.ID] = true
	}
	seen := map[string]bool{}
	for i, id := range ch.Delete {
		switch {
		case id == "":
			return cairn.Errorf(cairn.CodeInvalid, "delete[%d]: the TypeInstance id is empty", i)
		case updated[id]:
			return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{id},
				Msg: fmt.Sprintf("TypeInstance %q is both updated and deleted by one apply", id)}
		case seen[id]:
			return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{id},
				Msg: fmt.Sprintf("delete[%d]: TypeInstance %q appears more than once", i, id)}
		}
		seen[id] = true
	}
	return nil
}

func (h *Hub) applyChildrenOnce(ctx context.Context, ownerID string, ch ChildChanges) (ChildrenApplied, error) {
	var (
		items  []*pending
		edges  []UsesRelation
		ids    []string
		staged []*staged
		dels   []*externalWrite
		err    error
	)
	if len(ch.Create) > 0 {
		req := CreateRequest{Instances: make([]NewInstance, len(ch.Create))}
		for i, in := range ch.Create {
			if ownerID == "" {
				// ApplyChanges: no owner, and the aliases CreateInstances gives.
				req.Instances[i] = in
				continue
			}
			if in.Alias == "" {
				in.Alias = fmt.Sprintf("child-%d", i)
			}
			req.Instances[i] = in
			req.UsesRelations = append(req.UsesRelations, UsesRelation{From: ownerID, To: in.Alias})
		}
		if items, err = h.prepareCreate(ctx, req, h.now().UTC()); err != nil {
			return ChildrenApplied{}, err
		}
		if edges, err = h.resolveRelations(ctx, req.UsesRelations, items); err != nil {
			return ChildrenApplied{}, err
		}
		if edges, err = h.prepareProjections(ctx, items, edges); err != nil {
			return ChildrenApplied{}, err
		}
	}
	if len(ch.Update) > 0 {
		if ids, staged, err = h.stageUpdates(ctx, ch.Update); err != nil {
			return ChildrenApplied{}, err
		}
	}
	if len(ch.Delete) > 0 {
		if dels, _, err = h.stageOwnedDeletes(ctx, ownerID, ch.Delete, ""); err != nil {
			return ChildrenApplied{}, err
		}
	}

	creates := h.createWrites(items)
	if ownerID == "" {
		if err := h.checkNamesFree(ctx, creates); err != nil {
			return ChildrenApplied{}, err
		}
	}
	ws := append(append(creates, updateWrites(staged)...), dels...)
	j, failed, err := h.writeExternal(ctx, ws)
	if err != nil {
		switch {
		case failed == nil: // the intent journal, before any backend call
		case failed.w.Create != nil:
			err = withSubject(h.externalErr(ctx, failed.b.ID, "create", err), subjectOf(failed.inst.Alias))
		case failed.w.Update != nil:
			err = h.updateFailure(ctx, failed, err)
		default:
			err = h.externalErr(ctx, failed.b.ID, fmt.Sprintf("delete %q", failed.inst.ID), err)
		}
		return ChildrenApplied{}, h.undo(ctx, j, err)
	}

	var out ChildrenApplied
	var created []cairn.Instance
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if len(items) > 0 {
			if created, err = h.storeCreates(ctx, tx, items, edges); err != nil {
				return err
			}
		}
		if len(staged) > 0 {
			if out.Updated, err = h.storeUpdates(ctx, tx, ch.Update, ids, staged); err != nil {
				return err
			}
		}
		if len(ch.Delete) > 0 {
			return storeOwnedDeletes(ctx, tx, ownerID, ch.Delete, "")
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errVersionRace) && !isHubRefusal(err) && !isTypeRefusal(err) {
			if ownerID == "" {
				err = fmt.Errorf("failed to apply %d creates and %d updates: %w", len(items), len(staged), err)
			} else {
				err = fmt.Errorf("failed to apply the children of %q: %w", ownerID, err)
			}
		}
		return ChildrenApplied{}, h.undo(ctx, j, err)
	}
	h.settle(ctx, j)
	out.Created = make([]Created, len(items))
	for i, p := range items {
		out.Created[i] = Created{Alias: p.inst.Alias, ID: p.inst.ID, Instance: created[i]}
		if p.backend.AcceptValue {
			out.Created[i].Instance.Latest.Value = p.value
		}
	}
	out.Deleted = ch.Delete
	h.log.InfoContext(ctx, "applied children", "owner", ownerID, "created", len(out.Created), "updated", len(out.Updated),
		"deleted", len(out.Deleted), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	return out, nil
}
