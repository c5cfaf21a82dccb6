package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// LockInstances locks every id for owner, all or nothing. Locking again by
// the same owner succeeds and writes nothing; an id locked by another owner
// fails the call.
func (h *Hub) LockInstances(ctx context.Context, ids []string, owner string) error {
	return h.setLocks(ctx, ids, owner, true)
}

// UnlockInstances unlocks every id, all or nothing. Unlocking an instance
// locked by another owner is refused; an unlocked one stays unlocked and
// is not written.
func (h *Hub) UnlockInstances(ctx context.Context, ids []string, owner string) error {
	return h.setLocks(ctx, ids, owner, false)
}

func (h *Hub) setLocks(ctx context.Context, ids []string, owner string, lock bool) error {
	op := "unlock"
	if lock {
		op = "lock"
	}
	if owner == "" {
		return cairn.Errorf(cairn.CodeInvalid, "failed to %s TypeInstances: an owner ID is required", op)
	}
	if len(ids) == 0 {
		return cairn.Errorf(cairn.CodeInvalid, "failed to %s TypeInstances: no ids given", op)
	}
	ups := make([]UpdateInstance, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if err := refuseHubInstance(id); err != nil {
			return err
		}
		if !seen[id] {
			seen[id] = true
			ups = append(ups, UpdateInstance{ID: id, OwnerID: owner})
		}
	}
	uniq := make([]string, len(ups))
	for i, u := range ups {
		uniq[i] = u.ID
	}

	var before []cairn.Instance
	var changed []string
	err := h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		found, err := tx.GetInstancesBrief(ctx, uniq)
		if err != nil {
			return err
		}
		if err := checkPresentAndOwned(ups, found, op); err != nil {
			return err
		}
		newOwner := ""
		if lock {
			newOwner = owner
		}
		// Only the instances whose lock changes are written (and their
		// backends told): relocking by the owner or unlocking what nobody
		// locked succeeds, as in Capact's Local Hub, but is no change, so
		// it makes no new metadata.resourceVersion a client's next
		// replace would conflict with.
		before, changed = nil, nil
		for _, inst := range found {
			if inst.LockedBy != newOwner {
				before = append(before, inst)
				changed = append(changed, inst.ID)
			}
		}
		return tx.SetLockedBy(ctx, changed, newOwner)
	})
	if err != nil {
		if !isHubRefusal(err) {
			err = fmt.Errorf("failed to %s TypeInstances: %w", op, err)
		}
		return err
	}

	// External backends keep a copy of the lock (seed 000: the backend
	// stores the value and the locking state). When one refuses, the store
	// change is undone so hub and backends agree.
	if isDryRun(ctx) {
		return nil
	}
	if err := h.notifyLocks(ctx, before, owner, lock); err != nil {
		if uerr := h.restoreLocks(ctx, before); uerr != nil {
			return errors.Join(err, fmt.Errorf("restore the previous locks: %w", uerr))
		}
		return &opError{op: op, err: err}
	}
	if h.log.Enabled(ctx, slog.LevelDebug) { // every request is in the audit log too
		h.log.DebugContext(ctx, op+"ed instances", "count", len(changed), "owner", owner, "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	}
	return nil
}

func (h *Hub) notifyLocks(ctx context.Context, insts []cairn.Instance, owner string, lock bool) error {
	bs := h.newBackendSet()
	var done []cairn.Instance
	var failure error
	for _, inst := range insts {
		if inst.Backend.Abstract {
			continue
		}
		b, err := bs.get(ctx, inst.Backend.ID)
		if err == nil {
			if lock {
				err = b.client.OnLock(ctx, cairn.OnLockRequest{InstanceID: inst.ID, Context: inst.Latest.Context, LockedBy: owner})
			} else {
				err = b.client.OnUnlock(ctx, cairn.OnUnlockRequest{InstanceID: inst.ID, Context: inst.Latest.Context})
			}
			if err != nil {
				err = h.externalErr(ctx, b.ID, fmt.Sprintf("lock state of %q", inst.ID), err)
			}
		}
		if err != nil {
			failure = err
			break
		}
		done = append(done, inst)
	}
	if failure == nil {
		return nil
	}
	// Put back the backends already told, best effort.
	rctx := context.WithoutCancel(ctx)
	for _, inst := range done {
		b, err := bs.get(rctx, inst.Backend.ID)
		if err != nil {
			continue
		}
		switch {
		case inst.LockedBy != "":
			err = b.client.OnLock(rctx, cairn.OnLockRequest{InstanceID: inst.ID, Context: inst.Latest.Context, LockedBy: inst.LockedBy})
		default:
			err = b.client.OnUnlock(rctx, cairn.OnUnlockRequest{InstanceID: inst.ID, Context: inst.Latest.Context})
		}
		if err != nil {
			h.log.ErrorContext(ctx, "restoring a backend's lock state failed", "backend", b.ID, "instance", inst.ID, "err", err)
		}
	}
	return failure
}

// restoreLocks sets each instance's lock back to what it was.
func (h *Hub) restoreLocks(ctx context.Context, before []cairn.Instance) error {
	byOwner := map[string][]string{}
	for _, inst := range before {
		byOwner[inst.LockedBy] = append(byOwner[inst.LockedBy], inst.ID)
	}
	return h.write(context.WithoutCancel(ctx), func(ctx context.Context, tx store.Tx) error {
		for owner, ids := range byOwner {
			if err := tx.SetLockedBy(ctx, ids, owner); err != nil {
				return err
			}
		}
		return nil
	})
}
