package git

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
)

// Group commit (groupCommit: true). A write to a Git backend is a fetch,
// a commit and a push under the backend's lock, so concurrent writers
// queue behind each other and each pays a round trip to the remote. With
// group commit, the writers that queued while one write was under way are
// written together: the next writer in line takes every queued change (at
// most maxGroup, and one per instance) and commits them as one commit, one
// push. Each caller still gets its own answer: a change whose check fails
// (a resource version someone took, a lock) is answered with its own error
// and left out of the commit, the others go on; an error of the push
// itself is every member's. The commit is a batch commit (batch.go): one
// line and one Cairn-Change trailer per change, one Cairn-Actor trailer
// per distinct caller. Without contention nothing waits: a lone write is
// committed at once, exactly as without grouping.

// maxGroup bounds the changes of one group commit.
const maxGroup = 64

// groupQueue holds the writers waiting for a group commit.
type groupQueue struct {
	mu      sync.Mutex
	waiting []*queued
	leading bool // a writer is committing, or handing over to the next
}

// queued is one waiting writer.
type queued struct {
	ctx context.Context
	ch  change
	// lead is signalled when this writer is to commit the next group;
	// leader records that under the queue's lock.
	lead   chan struct{}
	leader bool
	taken  bool // in a group being committed
	done   chan groupResult
}

type groupResult struct {
	commit plumbing.Hash
	made   bool // a commit was made (else the tip already held the change)
	err    error
}

// changeError is the error of the i-th change of a write; it reads as the
// change's own error.
type changeError struct {
	i   int
	err error
}

func (e *changeError) Error() string { return e.err.Error() }
func (e *changeError) Unwrap() error { return e.err }

// commitOne writes one change: grouped with concurrent writers when the
// backend is configured so (and the write is not a sync's import), else
// as a commit of its own.
func (b *Backend) commitOne(ctx context.Context, ch change) (plumbing.Hash, error) {
	h, _, err := b.commitQueued(ctx, ch)
	return h, err
}

// commitQueued is commitOne that also says whether a commit was made.
func (b *Backend) commitQueued(ctx context.Context, ch change) (plumbing.Hash, bool, error) {
	if _, imp := b.importing(ctx); !b.cfg.GroupCommit || imp {
		return b.writeChanges(ctx, []change{ch})
	}
	ch.actor, ch.impersonator = cairn.Actor(ctx), cairn.Impersonator(ctx)
	q := &queued{ctx: ctx, ch: ch, lead: make(chan struct{}, 1), done: make(chan groupResult, 1)}
	g := &b.group
	g.mu.Lock()
	g.waiting = append(g.waiting, q)
	if !g.leading {
		g.leading = true
		q.leader = true
		g.mu.Unlock()
		b.lead()
	} else {
		g.mu.Unlock()
	}
	cancelled := ctx.Done()
	for {
		select {
		case r := <-q.done:
			return r.commit, r.made, r.err
		case <-q.lead:
			b.lead()
		case <-cancelled:
			g.mu.Lock()
			if !q.taken && !q.leader {
				g.waiting = removeQueued(g.waiting, q)
				g.mu.Unlock()
				return plumbing.ZeroHash, false, ctx.Err()
			}
			g.mu.Unlock()
			// Its change is being committed, or it must lead: the answer
			// comes, and says what happened.
			cancelled = nil
		}
	}
}

func removeQueued(qs []*queued, q *queued) []*queued {
	for i, x := range qs {
		if x == q {
			return append(qs[:i], qs[i+1:]...)
		}
	}
	return qs
}

// lead commits one group: the queued changes in order, one per instance,
// then hands over to the next writer in line, if any.
func (b *Backend) lead() {
	g := &b.group
	g.mu.Lock()
	var group, rest []*queued
	ids := map[string]bool{}
	for _, q := range g.waiting {
		if len(group) < maxGroup && !ids[q.ch.id] {
			ids[q.ch.id] = true
			q.taken = true
			group = append(group, q)
		} else {
			rest = append(rest, q)
		}
	}
	g.waiting = rest
	g.mu.Unlock()

	results := b.writeGroup(group)
	for i, q := range group {
		q.done <- results[i]
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.leading = false
		return
	}
	next := g.waiting[0]
	next.leader = true
	next.lead <- struct{}{}
}

// writeGroup commits the group's changes as one commit, answering each
// change whose check or apply fails with its own error and committing the
// others. Its I/O stops only when every member's context is done.
func (b *Backend) writeGroup(group []*queued) []groupResult {
	out := make([]groupResult, len(group))
	gctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	defer cancel()
	left := int32(len(group))
	for _, q := range group {
		stop := context.AfterFunc(q.ctx, func() {
			if atomic.AddInt32(&left, -1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	active := make([]int, len(group))
	for i := range group {
		active[i] = i
	}
	for len(active) > 0 {
		chs := make([]change, len(active))
		for j, i := range active {
			chs[j] = group[i].ch
		}
		commit, made, err := b.writeChanges(gctx, chs)
		var ce *changeError
		if errors.As(err, &ce) && len(active) > 1 {
			out[active[ce.i]].err = ce.err
			active = append(active[:ce.i], active[ce.i+1:]...)
			continue
		}
		if ce != nil {
			err = ce.err
		}
		for _, i := range active {
			out[i] = groupResult{commit: commit, made: made, err: err}
		}
		break
	}
	return out
}
