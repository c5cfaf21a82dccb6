package hub

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn"
)

// externalWrite is one write of a request to an external backend.
type externalWrite struct {
	b    *resolvedBackend
	inst cairn.Instance
	w    cairn.BatchWrite
	// done records the write's success and the context it returned.
	done func(newCtx json.RawMessage)
}

// writeExternal sends a request's writes to their backends in order. A
// backend that implements cairn.BatchWriter and gets more than one write
// gets them all in one OnBatch call (a Git backend: one commit); the others
// get one call per write; a delete of what a backend forgot already counts
// as done. It stops at the first failure, which it returns
// with the instance it is about; the writes reported done before stay
// done, for the caller to roll back. A dry run sends nothing.
func (h *Hub) writeExternal(ctx context.Context, ws []*externalWrite) (failed *externalWrite, err error) {
	if isDryRun(ctx) {
		return nil, nil
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
		if bw, ok := group[0].b.client.(cairn.BatchWriter); ok && len(group) > 1 {
			batch := make([]cairn.BatchWrite, len(group))
			for i, w := range group {
				batch[i] = w.w
				if m, ok := cairn.ResourceMetaFrom(h.withResourceMeta(ctx, w.b, w.inst)); ok {
					batch[i].Meta = &m
				}
			}
			ctxs, err := bw.OnBatch(ctx, batch)
			if err != nil {
				return group[0], err
			}
			for i, w := range group {
				var c json.RawMessage
				if i < len(ctxs) {
					c = ctxs[i]
				}
				w.done(c)
			}
			continue
		}
		for _, w := range group {
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
				return w, err
			}
			w.done(newCtx)
		}
	}
	return nil, nil
}
