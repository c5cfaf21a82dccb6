package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn"
)

// externalWrite is one write of a request to an external backend.
type externalWrite struct {
	b    *resolvedBackend
	inst cairn.Instance
	w    cairn.BatchWrite
	// done records the write's success and the context it returned.
	done func(newCtx json.RawMessage)
	// newCtx is what done got: the context the backend returned, nil
	// when unchanged.
	newCtx json.RawMessage
}

func (w *externalWrite) finish(newCtx json.RawMessage) {
	w.newCtx = newCtx
	if w.done != nil {
		w.done(newCtx)
	}
}

// storedBatch is one backend's share of a request, stored by OnBatch.
type storedBatch struct {
	bw     cairn.BatchWriter
	b      *resolvedBackend
	ws     []*externalWrite
	writes []cairn.BatchWrite
	res    cairn.BatchResult
}

// journal records what a request stored in external backends, so that a
// failure later in the request (another backend, the store transaction)
// can take it back.
type journal struct {
	batches []storedBatch
	singles []*externalWrite // writes of backends without batches, done
	// later are the deletes of backends without batches: a delete cannot
	// be taken back, so it is sent only once the store committed (settle),
	// its intent recorded before, so that recovery finishes it when this
	// process dies first.
	later []*externalWrite
	// intents are the request's entries in the store's intent journal
	// (journal.go); keep are those that must outlive the request: a write
	// whose backend never answered, or whose undo failed, is left for
	// recovery.
	intents []intentKey
	keep    map[intentKey]bool
}

// keepIntent leaves the intent of w for recovery.
func (j *journal) keepIntent(w *externalWrite) {
	k, ok := intentOf(w)
	if !ok {
		return
	}
	if j.keep == nil {
		j.keep = map[intentKey]bool{}
	}
	j.keep[k] = true
}

// ambiguous reports whether a failed backend call may have stored what it
// was asked to: the backend did not answer (cairn.ErrNoAnswer: a timeout,
// a lost connection; or the caller's context ended), as opposed to
// answering with a refusal or an error of its own. Such a write is not
// undone at once, since the undo could overtake it on the network: its
// intent stays and recovery undoes it after the grace period.
func ambiguous(err error) bool {
	return errors.Is(err, cairn.ErrNoAnswer) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// writeExternal sends a request's writes to their backends. Each backend
// that implements cairn.BatchWriter gets its whole share as one OnBatch
// call (a Git backend: one commit or one pull request), whatever mix of
// creates, updates and deletes it is (UndoBatch takes it all back); the
// others get one call per create or update, and their deletes, which the
// storage-backend protocol cannot take back, wait in the journal until the
// store committed (settle sends them), as do the deletes of a batch writer
// that defers them for this call (cairn.DeleteDeferrer). Every write's intent is recorded
// first. It stops at the first failure, which it returns with the write it
// is about; what was stored before is in the journal, for the caller to
// undo. A dry run sends nothing.
func (h *Hub) writeExternal(ctx context.Context, ws []*externalWrite) (j *journal, failed *externalWrite, err error) {
	j = &journal{}
	if isDryRun(ctx) || len(ws) == 0 {
		return j, nil, nil
	}
	if j.intents, err = h.recordIntents(ctx, ws, true); err != nil {
		return j, nil, err
	}
	byBackend := map[string][]*externalWrite{}
	var order []string
	for _, w := range ws {
		if _, ok := byBackend[w.b.ID]; !ok {
			order = append(order, w.b.ID)
		}
		byBackend[w.b.ID] = append(byBackend[w.b.ID], w)
	}
	for _, id := range order {
		group := byBackend[id]
		if bw, ok := batchWriter(group[0]); ok {
			if defersDeletes(ctx, group[0]) {
				// Its deletes wait for the store's commit (settle sends
				// them, as one batch); the rest go now.
				var now []*externalWrite
				for _, w := range group {
					if w.w.Delete != nil {
						j.later = append(j.later, w)
					} else {
						now = append(now, w)
					}
				}
				if group = now; len(group) == 0 {
					continue
				}
			}
			batch := h.batchOf(ctx, group)
			res, err := bw.OnBatch(ctx, batch)
			if err != nil {
				if ambiguous(err) {
					for _, w := range group {
						j.keepIntent(w)
					}
				}
				return j, batchFailure(group, err), err
			}
			for i, w := range group {
				var c json.RawMessage
				if i < len(res.Contexts) {
					c = res.Contexts[i]
				}
				w.finish(c)
			}
			j.batches = append(j.batches, storedBatch{bw: bw, b: group[0].b, ws: group, writes: batch, res: res})
			continue
		}
		for _, w := range group {
			if w.w.Delete != nil {
				j.later = append(j.later, w)
				continue
			}
			if err := h.writeOne(ctx, w); err != nil {
				if ambiguous(err) {
					j.keepIntent(w)
				}
				return j, w, err
			}
			j.singles = append(j.singles, w)
		}
	}
	return j, nil, nil
}

// batchOf is the writes of group, one backend's share, as one batch.
func (h *Hub) batchOf(ctx context.Context, group []*externalWrite) []cairn.BatchWrite {
	batch := make([]cairn.BatchWrite, len(group))
	for i, w := range group {
		batch[i] = w.w
		if m, ok := cairn.ResourceMetaFrom(h.withResourceMeta(ctx, w.b, w.inst)); ok {
			batch[i].Meta = &m
		}
	}
	return batch
}

// defersDeletes says whether w's backend, one that takes batches, wants
// the deletes of this call only once the store committed
// (cairn.DeleteDeferrer: a Git backend importing a sync's removals).
func defersDeletes(ctx context.Context, w *externalWrite) bool {
	d, ok := w.b.client.(cairn.DeleteDeferrer)
	return ok && d.DefersDeletes(ctx)
}

// batchWriter is w's backend when it takes batches: writeExternal sends
// it w with the rest of its share, deletes included, before the store
// commits (which recordIntents journals as such).
func batchWriter(w *externalWrite) (cairn.BatchWriter, bool) {
	bw, ok := w.b.client.(cairn.BatchWriter)
	return bw, ok
}

// batchFailure is the write of a failed batch that the backend's error
// names (by instance id), else the batch's first.
func batchFailure(group []*externalWrite, err error) *externalWrite {
	var e *cairn.Error
	if errors.As(err, &e) {
		for _, id := range e.IDs {
			for _, w := range group {
				if w.inst.ID == id {
					return w
				}
			}
		}
	}
	return group[0]
}

func (h *Hub) writeOne(ctx context.Context, w *externalWrite) error {
	wctx := h.withResourceMeta(ctx, w.b, w.inst)
	var newCtx json.RawMessage
	var err error
	switch {
	case w.w.Create != nil:
		newCtx, err = w.b.client.OnCreate(wctx, *w.w.Create)
	case w.w.Update != nil:
		newCtx, err = w.b.client.OnUpdate(wctx, *w.w.Update)
	case w.w.Delete != nil:
		err = w.b.client.OnDelete(wctx, *w.w.Delete)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			err = nil // the backend forgot it already: done
		}
	}
	if err != nil {
		return err
	}
	w.finish(newCtx)
	return nil
}

// undo takes back what the journal recorded: each batch
// with one UndoBatch (a Git backend: one commit restoring the files, or
// its pull request closed), each single create with OnDelete and each
// single update with OnDeleteRevision. The deletes waiting for the commit
// were never sent: their intents are forgotten with the others. It
// returns cause joined with whatever the undo could not do.
func (h *Hub) undo(ctx context.Context, j *journal, cause error) error {
	if j == nil {
		return cause
	}
	// Undo must run even when ctx was cancelled mid-request.
	rctx := cairn.WithRollback(context.WithoutCancel(ctx))
	var errs []error
	for _, w := range j.singles {
		wctx := h.withResourceMeta(rctx, w.b, w.inst)
		var err error
		var what string
		switch {
		case w.w.Create != nil:
			c := w.w.Create.Context
			if w.newCtx != nil {
				c = w.newCtx
			}
			what = fmt.Sprintf("delete %q", w.inst.ID)
			err = w.b.client.OnDelete(wctx, cairn.OnDeleteRequest{InstanceID: w.inst.ID, Context: c})
		case w.w.Update != nil:
			c := w.w.Update.Context
			if w.newCtx != nil {
				c = w.newCtx
			}
			what = fmt.Sprintf("delete revision %d of %q", w.w.Update.NewResourceVersion, w.inst.ID)
			err = w.b.client.OnDeleteRevision(wctx, cairn.OnDeleteRevisionRequest{InstanceID: w.inst.ID,
				ResourceVersion: w.w.Update.NewResourceVersion, Context: c, OwnerID: w.w.Update.OwnerID})
		default:
			continue
		}
		if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			j.keepIntent(w)
			errs = append(errs, h.externalErr(ctx, w.b.ID, what, err))
			h.log.ErrorContext(ctx, "rollback of an externally stored value failed", "backend", w.b.ID, "instance", w.inst.ID, "err", err)
		}
	}
	for i := len(j.batches) - 1; i >= 0; i-- {
		sb := j.batches[i]
		if err := sb.bw.UndoBatch(rctx, sb.writes, sb.res); err != nil {
			for _, w := range sb.ws {
				j.keepIntent(w)
			}
			errs = append(errs, h.externalErr(ctx, sb.b.ID, fmt.Sprintf("undo a batch of %d writes", len(sb.writes)), err))
			h.log.ErrorContext(ctx, "rollback of an externally stored batch failed", "backend", sb.b.ID, "writes", len(sb.writes), "err", err)
		}
	}
	h.forgetIntents(ctx, j.intents, j.keep)
	*j = journal{}
	if len(errs) > 0 {
		return errors.Join(cause, &cairn.Error{Code: cairn.CodeUnavailable,
			Msg: "rollback externally stored values: " + errors.Join(errs...).Error()})
	}
	return cause
}
