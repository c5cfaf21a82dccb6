package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// The intent journal closes the gap between an external backend and the
// store: a write records its intent (instance, resource version, backend,
// operation) in the store before the backend is called, and forgets it once
// the store committed or the backend's value was rolled back. A process
// that dies in between leaves the intent behind; Recover, run by the
// recovery controller, finds it and undoes what the backend may hold that
// no committed version points to (the outbox pattern, read backwards: the
// store is the truth, the backend is brought back to it).

// intentKey names a journal entry.
type intentKey struct {
	id string
	rv int
}

// intentOf is the journal entry of an external write. A delete takes the
// key of the instance's create, (id, 1): until the backend has deleted the
// value, a new instance with the same id cannot be created in its place
// (its value would collide with the old one, or be deleted with it).
func intentOf(w *externalWrite) (intentKey, bool) {
	switch {
	case w.w.Create != nil, w.w.Delete != nil:
		return intentKey{w.inst.ID, 1}, true
	case w.w.Update != nil:
		return intentKey{w.inst.ID, w.w.Update.NewResourceVersion}, true
	}
	return intentKey{}, false
}

// recordIntents journals the writes of ws, in one transaction, before any
// is sent. A write of a version another writer is already on its way to
// (or that recovery has not finished) is refused with CodeAlreadyExists,
// which for an update is a lost version race. batches says whether ws go
// through writeExternal, whose deletes to a cairn.BatchWriter go with the
// batch, before the store's commit; any other delete is sent after it.
func (h *Hub) recordIntents(ctx context.Context, ws []*externalWrite, batches bool) ([]intentKey, error) {
	var keys []intentKey
	var ins []store.Intent
	now := h.now().UTC()
	for _, w := range ws {
		k, ok := intentOf(w)
		if !ok {
			continue
		}
		in := store.Intent{InstanceID: k.id, ResourceVersion: k.rv, BackendID: w.b.ID, CreatedAt: now, NextAttempt: now}
		switch {
		case w.w.Create != nil:
			in.Op, in.Context = store.IntentCreate, w.w.Create.Context
		case w.w.Update != nil:
			in.Op, in.Context = store.IntentUpdate, w.w.Update.Context
		default:
			in.Op, in.Context, in.OwnerID = store.IntentDelete, w.w.Delete.Context, w.w.Delete.OwnerID
			if _, ok := batchWriter(w); ok && batches && !defersDeletes(ctx, w) {
				in.Op = store.IntentBatchDelete
			}
		}
		keys, ins = append(keys, k), append(ins, in)
	}
	if len(ins) == 0 {
		return nil, nil
	}
	err := h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, in := range ins {
			if err := tx.PutIntent(ctx, in); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case cairn.HasCode(err, cairn.CodeAlreadyExists):
		return nil, fmt.Errorf("%w: %w", errVersionRace, err)
	case err != nil:
		return nil, fmt.Errorf("record the intent to write to external backends: %w", err)
	}
	return keys, nil
}

// settle finishes a request whose store transaction committed: it sends
// the deletes that waited for the commit and forgets the journal entries.
// A delete the backend did not do keeps its intent, and recovery sends it
// again (with backoff) until it is done: the instance is gone from the
// store, so its value is one no committed version points to. The request
// itself succeeded; the failure is logged, and recovery's metrics count it.
func (h *Hub) settle(ctx context.Context, j *journal) {
	if j == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	// The deletes of a batch writer that deferred them go as one batch
	// (a Git backend: one commit for a sync's removals).
	deferred := map[string][]*externalWrite{}
	var order []string
	for _, w := range j.later {
		if _, ok := batchWriter(w); ok && defersDeletes(ctx, w) {
			if _, seen := deferred[w.b.ID]; !seen {
				order = append(order, w.b.ID)
			}
			deferred[w.b.ID] = append(deferred[w.b.ID], w)
			continue
		}
		if err := h.writeOne(ctx, w); err != nil {
			j.keepIntent(w)
			h.log.WarnContext(ctx, "a deleted instance's value is still in its backend; recovery (cairn serve's, or cairn backends recover) deletes it once the backend answers",
				"instance", w.inst.ID, "backend", w.b.ID, "err", err)
		}
	}
	for _, id := range order {
		group := deferred[id]
		bw, _ := batchWriter(group[0])
		if _, err := bw.OnBatch(ctx, h.batchOf(ctx, group)); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			for _, w := range group {
				j.keepIntent(w)
			}
			h.log.WarnContext(ctx, "deleted instances' values are still in their backend; recovery (cairn serve's, or cairn backends recover) deletes them once the backend answers",
				"instances", len(group), "backend", id, "err", err)
		}
	}
	h.forgetIntents(ctx, j.intents, j.keep)
}

// forgetIntents clears journal entries, except those in keep. A failure
// only leaves work for Recover, which finds the write committed (or undoes
// it again, which backends take as done), so it is logged, not returned.
func (h *Hub) forgetIntents(ctx context.Context, keys []intentKey, keep map[intentKey]bool) {
	var forget []intentKey
	for _, k := range keys {
		if !keep[k] {
			forget = append(forget, k)
		}
	}
	if len(forget) == 0 {
		return
	}
	err := h.st.Update(context.WithoutCancel(ctx), func(ctx context.Context, tx store.Tx) error {
		for _, k := range forget {
			if err := tx.DeleteIntent(ctx, k.id, k.rv); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.log.WarnContext(ctx, "forget finished intents; recovery will clear them", "count", len(forget), "err", err)
	}
}

// RecoveryResult is what one Recover pass did.
type RecoveryResult struct {
	// Committed counts intents whose write had committed: only the journal
	// entry was left.
	Committed int
	// Undone counts writes that never committed and whose value the backend
	// was asked to delete (or no longer had).
	Undone int
	// Deleted counts deletes that had committed and whose value the backend
	// was then asked to delete (or no longer had).
	Deleted int
	// Restored counts deletes sent with a batch that the store never
	// committed, whose value the backend put back (or still had).
	Restored int
	// Failed lists the intents that could not be finished this time (their
	// backend is down, or refused); they are retried with backoff.
	Failed []store.Intent
	// Waiting counts intents younger than the grace period: writes that may
	// still be on their way in a live process.
	Waiting int
}

// maxRecoveryBackoff caps the wait between attempts at one intent.
const maxRecoveryBackoff = 5 * time.Minute

// Recover finishes the intents a dead process left: each older than grace
// (so that writes still on their way in a live process, here or in another
// replica, are left alone; grace must exceed the longest write, backend
// timeout included) is either found committed and forgotten, or undone in
// its backend (OnDelete for a create, OnDeleteRevision for an update) and
// then forgotten. A delete is the other way round: one that committed is
// sent to the backend (OnDelete), one that did not is forgotten, or, when
// its backend did it with a batch before the commit, put back there
// (cairn.DeleteRestorer). A backend that fails is retried at a later pass
// with exponential backoff; the result lists what is still pending.
func (h *Hub) Recover(ctx context.Context, grace time.Duration) (RecoveryResult, error) {
	now := h.now().UTC()
	return h.recover(ctx, grace, now, now)
}

// RecoverNow is Recover for a person who asks (cairn backends recover):
// intents waiting out their backoff (at most maxRecoveryBackoff) are tried
// too, since the backend may be back now.
func (h *Hub) RecoverNow(ctx context.Context, grace time.Duration) (RecoveryResult, error) {
	now := h.now().UTC()
	return h.recover(ctx, grace, now, now.Add(2*maxRecoveryBackoff))
}

func (h *Hub) recover(ctx context.Context, grace time.Duration, now, dueBy time.Time) (RecoveryResult, error) {
	var res RecoveryResult
	due, err := h.st.Intents(ctx, dueBy)
	if err != nil {
		return res, fmt.Errorf("recover: read the intent journal: %w", err)
	}
	bs := h.newBackendSet()
	var rest []store.Intent
	for _, in := range due {
		if now.Sub(in.CreatedAt) < grace {
			res.Waiting++
			continue
		}
		rest = append(rest, in)
	}
	// The writes of a backend that finishes them together
	// (cairn.BatchRecoverer) go as one call; what it could not finish, and
	// every other intent, one by one.
	rest, err = h.recoverBatches(ctx, bs, rest, now, &res)
	if err != nil {
		return res, err
	}
	for _, in := range rest {
		done, err := h.finishIntent(ctx, bs, in)
		if err != nil {
			if rerr := h.retryLater(ctx, &in, err, now, &res); rerr != nil {
				return res, rerr
			}
			continue
		}
		if err := h.finished(ctx, []store.Intent{in}, []intentOutcome{done}, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// finished forgets the intents recovery finished, in one transaction, and
// counts and logs what it took.
func (h *Hub) finished(ctx context.Context, ins []store.Intent, done []intentOutcome, res *RecoveryResult) error {
	if err := h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, in := range ins {
			if err := tx.DeleteIntent(ctx, in.InstanceID, in.ResourceVersion); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for i, in := range ins {
		switch done[i] {
		case intentCommitted:
			res.Committed++
		case intentUndone:
			res.Undone++
			h.log.InfoContext(ctx, "recovery undid an interrupted write",
				"instance", in.InstanceID, "resourceVersion", in.ResourceVersion, "backend", in.BackendID, "op", string(in.Op))
		case intentDeleted:
			res.Deleted++
			h.log.InfoContext(ctx, "recovery deleted a deleted instance's value from its backend",
				"instance", in.InstanceID, "backend", in.BackendID)
		case intentRestored:
			res.Restored++
			h.log.InfoContext(ctx, "recovery put back the value of an instance whose delete never committed",
				"instance", in.InstanceID, "resourceVersion", in.ResourceVersion, "backend", in.BackendID)
		}
	}
	return nil
}

// recoverBatches finishes, one call per backend, the intents whose backend
// is a cairn.BatchRecoverer: the writes that never committed are undone
// and the committed deletes sent, together, as the request made them (a
// failed import of 1,000 files of a Git backend: one undo commit, one
// push). It returns the intents left for finishIntent: those of other
// backends and those only the store had to settle or a restore needs. The
// writes of a batch the backend failed are each tried alone, with
// RecoverBatch again, unless the backend is unavailable: those are retried
// later, as a batch again.
func (h *Hub) recoverBatches(ctx context.Context, bs *backendSet, ins []store.Intent, now time.Time, res *RecoveryResult) ([]store.Intent, error) {
	type group struct {
		rb     cairn.BatchRecoverer
		ins    []store.Intent
		writes []cairn.RecoveryWrite
		done   []intentOutcome
	}
	groups := map[string]*group{}
	var order []string
	var rest []store.Intent
	for _, in := range ins {
		b, err := bs.get(ctx, in.BackendID)
		if err != nil {
			rest = append(rest, in) // finishIntent reports it
			continue
		}
		rb, ok := b.client.(cairn.BatchRecoverer)
		if !ok {
			rest = append(rest, in)
			continue
		}
		found, err := h.st.GetInstancesBrief(ctx, []string{in.InstanceID})
		if err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
		var w cairn.RecoveryWrite
		var done intentOutcome
		switch in.Op {
		case store.IntentCreate, store.IntentUpdate:
			owner := ""
			if len(found) == 1 {
				if found[0].Latest.ResourceVersion >= in.ResourceVersion {
					rest = append(rest, in) // committed: only the entry is left
					continue
				}
				owner = found[0].LockedBy
			}
			done = intentUndone
			if in.Op == store.IntentCreate {
				w.UndoCreate = &cairn.OnDeleteRequest{InstanceID: in.InstanceID, Context: in.Context, OwnerID: owner}
			} else {
				w.UndoUpdate = &cairn.OnDeleteRevisionRequest{InstanceID: in.InstanceID, ResourceVersion: in.ResourceVersion, Context: in.Context, OwnerID: owner}
			}
		case store.IntentDelete, store.IntentBatchDelete:
			if len(found) == 1 && found[0].Backend.ID == in.BackendID {
				rest = append(rest, in) // never committed: nothing, or a restore
				continue
			}
			done = intentDeleted
			w.Delete = &cairn.OnDeleteRequest{InstanceID: in.InstanceID, Context: in.Context, OwnerID: in.OwnerID}
		default:
			rest = append(rest, in)
			continue
		}
		g := groups[in.BackendID]
		if g == nil {
			g = &group{rb: rb}
			groups[in.BackendID] = g
			order = append(order, in.BackendID)
		}
		g.ins, g.writes, g.done = append(g.ins, in), append(g.writes, w), append(g.done, done)
	}
	for _, id := range order {
		g := groups[id]
		err := g.rb.RecoverBatch(ctx, g.writes)
		if err == nil {
			if err := h.finished(ctx, g.ins, g.done, res); err != nil {
				return nil, err
			}
			continue
		}
		if len(g.ins) > 1 && !cairn.HasCode(err, cairn.CodeUnavailable) {
			// Each alone, still through RecoverBatch: the backend's single
			// calls (OnDelete) do not make the checks its recovery makes
			// (a Git backend leaves a file a person re-added alone).
			h.log.WarnContext(ctx, "recovery could not finish a backend's interrupted writes together; trying each alone",
				"backend", id, "writes", len(g.ins), "err", err)
			var down error // once the backend is found unavailable, the rest wait
			for i, in := range g.ins {
				err := down
				if err == nil {
					err = g.rb.RecoverBatch(ctx, g.writes[i:i+1])
				}
				if err == nil {
					err = h.finished(ctx, g.ins[i:i+1], g.done[i:i+1], res)
					if err != nil {
						return nil, err
					}
					continue
				}
				if down == nil && cairn.HasCode(err, cairn.CodeUnavailable) {
					down = err
				}
				err = h.externalErr(ctx, id, fmt.Sprintf("finish the interrupted %s of %q", in.Op, in.InstanceID), err)
				if rerr := h.retryLater(ctx, &in, err, now, res); rerr != nil {
					return nil, rerr
				}
			}
			continue
		}
		err = h.externalErr(ctx, id, fmt.Sprintf("finish %d interrupted writes", len(g.ins)), err)
		for _, in := range g.ins {
			if rerr := h.retryLater(ctx, &in, err, now, res); rerr != nil {
				return nil, rerr
			}
		}
	}
	return rest, nil
}

// retryLater records that recovery could not finish in (err), to be tried
// again after a backoff.
func (h *Hub) retryLater(ctx context.Context, in *store.Intent, err error, now time.Time, res *RecoveryResult) error {
	in.Attempts++
	in.LastError = err.Error()
	backoff := min(maxRecoveryBackoff, time.Second<<min(in.Attempts, 16))
	in.NextAttempt = now.Add(backoff)
	if rerr := h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.RetryIntent(ctx, in.InstanceID, in.ResourceVersion, in.LastError, in.NextAttempt)
	}); rerr != nil && !cairn.HasCode(rerr, cairn.CodeNotFound) {
		return fmt.Errorf("recover: %w", rerr)
	}
	h.log.ErrorContext(ctx, "recovery could not finish an interrupted write; retrying later",
		"instance", in.InstanceID, "resourceVersion", in.ResourceVersion, "backend", in.BackendID,
		"op", string(in.Op), "attempts", in.Attempts, "retryAt", in.NextAttempt, "err", err)
	res.Failed = append(res.Failed, *in)
	return nil
}

// intentOutcome is what finishing an intent took.
type intentOutcome int

const (
	// intentCommitted: the store has what the intent announced (a write
	// committed, or a delete that never committed and so was never sent):
	// only the journal entry was left.
	intentCommitted intentOutcome = iota
	// intentUndone: a write that never committed was deleted from its
	// backend.
	intentUndone
	// intentDeleted: a committed delete was sent to the backend.
	intentDeleted
	// intentRestored: a delete the backend did with its batch never
	// committed, and the backend put the value back.
	intentRestored
)

// finishIntent brings the intent's backend back to what the store holds.
func (h *Hub) finishIntent(ctx context.Context, bs *backendSet, in store.Intent) (intentOutcome, error) {
	if in.Op != store.IntentDelete && in.Op != store.IntentBatchDelete {
		committed, err := h.undoIntent(ctx, bs, in)
		if committed || err != nil {
			return intentCommitted, err
		}
		return intentUndone, nil
	}
	// An instance still in the store (in the same backend; a new one with
	// this id in that backend cannot have been created while the intent
	// held its key) means the delete never committed. A plain delete is
	// sent only after its commit, so the backend was never asked; a
	// batch's went with the batch, so the backend may have done it and
	// must put the value back.
	found, err := h.st.GetInstancesBrief(ctx, []string{in.InstanceID})
	if err != nil {
		return intentCommitted, err
	}
	kept := len(found) == 1 && found[0].Backend.ID == in.BackendID
	if kept && in.Op == store.IntentDelete {
		return intentCommitted, nil
	}
	b, err := bs.get(ctx, in.BackendID)
	if err != nil {
		return intentCommitted, fmt.Errorf("backend %q: %w", in.BackendID, err)
	}
	if kept {
		r, ok := b.client.(cairn.DeleteRestorer)
		if !ok {
			return intentCommitted, h.externalErr(ctx, b.ID, fmt.Sprintf("put back the value of %q, whose delete never committed", in.InstanceID),
				cairn.Errorf(cairn.CodeInternal, "the backend takes batches but cannot restore a deleted value"))
		}
		if err := r.RestoreDeleted(h.withResourceMeta(ctx, b, found[0]), cairn.OnDeleteRequest{InstanceID: in.InstanceID, Context: in.Context, OwnerID: in.OwnerID}); err != nil {
			return intentCommitted, h.externalErr(ctx, b.ID, fmt.Sprintf("put back the value of %q, whose delete never committed", in.InstanceID), err)
		}
		return intentRestored, nil
	}
	err = b.client.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: in.InstanceID, Context: in.Context, OwnerID: in.OwnerID})
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return intentCommitted, h.externalErr(ctx, b.ID, fmt.Sprintf("delete the value of deleted instance %q", in.InstanceID), err)
	}
	return intentDeleted, nil
}

// undoIntent reports whether the intent's write committed; when it did
// not, it deletes what the backend may hold of it.
func (h *Hub) undoIntent(ctx context.Context, bs *backendSet, in store.Intent) (committed bool, err error) {
	found, err := h.st.GetInstancesBrief(ctx, []string{in.InstanceID})
	if err != nil {
		return false, err
	}
	owner := ""
	if len(found) == 1 {
		if found[0].Latest.ResourceVersion >= in.ResourceVersion {
			return true, nil
		}
		owner = found[0].LockedBy
	}
	b, err := bs.get(ctx, in.BackendID)
	if err != nil {
		return false, fmt.Errorf("backend %q: %w", in.BackendID, err)
	}
	ctx = cairn.WithRollback(ctx)
	switch in.Op {
	case store.IntentCreate:
		err = b.client.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: in.InstanceID, Context: in.Context, OwnerID: owner})
	case store.IntentUpdate:
		err = b.client.OnDeleteRevision(ctx, cairn.OnDeleteRevisionRequest{InstanceID: in.InstanceID,
			ResourceVersion: in.ResourceVersion, Context: in.Context, OwnerID: owner})
	default:
		return false, fmt.Errorf("unknown intent operation %q", in.Op)
	}
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return false, h.externalErr(ctx, b.ID, fmt.Sprintf("undo %s of %q resource version %d", in.Op, in.InstanceID, in.ResourceVersion), err)
	}
	return false, nil
}

// PendingIntents lists the journal's entries, for reports (cairn backends
// check, metrics).
func (h *Hub) PendingIntents(ctx context.Context) ([]store.Intent, error) {
	ins, err := h.st.Intents(ctx, time.Now().Add(100*365*24*time.Hour))
	if err != nil {
		return nil, fmt.Errorf("read the intent journal: %w", err)
	}
	return ins, nil
}
