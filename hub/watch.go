package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// notifier wakes watchers of this process at once after a write; writes of
// other replicas wake them when the store tells of them (listen.go), and
// are found by polling the store's change log otherwise.
//
// A signal from the store names the position of the commit's newest
// change, so watchers woken by it read the log up to there without asking
// the store for its position first (on PostgreSQL, rounds of a network
// round trip each, with a hundred watchers waking at once); a signal that
// names none (a commit through this process, the listener starting again)
// makes them ask.
type notifier struct {
	mu    sync.Mutex
	wake  chan struct{}
	heard int64  // the highest position a signal named
	blind uint64 // how many signals named none
}

func newNotifier() *notifier { return &notifier{wake: make(chan struct{})} }

// wait returns a channel closed at the next signal.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wake
}

// state returns what the signals so far told: the highest position named,
// and how many signals named none.
func (n *notifier) state() (heard int64, blind uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.heard, n.blind
}

// signal wakes the watchers for a commit whose position is not known.
func (n *notifier) signal() { n.signalAt(0) }

// signalAt wakes the watchers for a commit whose newest change is at
// position seq (0: not known).
func (n *notifier) signalAt(seq int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if seq > 0 {
		n.heard = max(n.heard, seq)
	} else {
		n.blind++
	}
	close(n.wake)
	n.wake = make(chan struct{})
}

// defaultPollInterval bounds how late a watcher sees a change made through
// another replica.
const defaultPollInterval = time.Second

// LastSeq returns the position of the newest change in the change log.
func (h *Hub) LastSeq(ctx context.Context) (int64, error) {
	read := h.st.LastSeq
	if h.cache != nil {
		read = h.cache.Position // shares the query with reads under way
	}
	seq, err := read(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the change log position: %w", err)
	}
	return seq, nil
}

// Changes returns up to limit changes after position after, oldest first;
// CodeGone when that position was already pruned.
func (h *Hub) Changes(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if c := h.readCache(); c != nil {
		// The changes the read cache applied: every watch of the process
		// shares its one read of the log per commit.
		cs, ok, err := c.ChangesAfter(ctx, after, limit)
		if err != nil {
			return nil, fmt.Errorf("read the change log after %d: %w", after, err)
		}
		if ok {
			return cs, nil
		}
	}
	cs, err := h.st.Changes(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the change log after %d: %w", after, err)
	}
	return cs, nil
}

// changesTo is Changes for a watcher that knows the log reaches position
// target at least: the read cache applies the log up to there without
// asking the store for its position.
func (h *Hub) changesTo(ctx context.Context, after, target int64, limit int) ([]store.Change, error) {
	c := h.readCache()
	if c == nil {
		return h.Changes(ctx, after, limit)
	}
	cs, ok, err := c.ChangesAfterTo(ctx, after, target, limit)
	if err != nil {
		return nil, fmt.Errorf("read the change log after %d: %w", after, err)
	}
	if ok {
		return cs, nil
	}
	return h.Changes(ctx, after, limit)
}

// Watch calls fn for every change after position after, in order, until
// ctx ends (it then returns nil) or fn or the store fails. A position that
// was pruned fails with CodeGone.
func (h *Hub) Watch(ctx context.Context, after int64, fn func(store.Change) error) error {
	// Listening starts before the first read of the log: a commit is
	// either in that read or heard of afterwards.
	defer h.listen()()
	ticker := time.NewTicker(h.pollInterval)
	defer ticker.Stop()
	// The first read, every poll and every wake by a signal that named no
	// position read the log up to the store's position (full); a wake by
	// signals that named positions reads up to the highest of them. Every
	// commit is covered: a commit through this process signals without a
	// position after it committed, one through another replica names its
	// position, and a notification missed is found by the poll.
	full := true
	var blindRead uint64
	for {
		wake := h.notify.wait()
		heard, blind := h.notify.state()
		if blind != blindRead {
			full = true
		}
		if full {
			blindRead = blind
		}
		for {
			var cs []store.Change
			var err error
			if full {
				cs, err = h.Changes(ctx, after, 500)
			} else {
				cs, err = h.changesTo(ctx, after, heard, 500)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for _, c := range cs {
				if err := fn(c); err != nil {
					return err
				}
				after = c.Seq
			}
			if len(cs) < 500 {
				break
			}
		}
		full = false
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-ticker.C:
			full = true
		}
	}
}

// PruneChanges forgets all but the newest keep changes of the change log,
// so it does not grow without bound; watchers further behind get CodeGone
// and must list again, as Kubernetes clients do on 410 Gone.
func (h *Hub) PruneChanges(ctx context.Context, keep int64) error {
	last, err := h.st.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("prune the change log: %w", err)
	}
	if last <= keep {
		return nil
	}
	err = h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.PruneChanges(ctx, last-keep)
	})
	if err != nil {
		return fmt.Errorf("prune the change log: %w", err)
	}
	if h.cache != nil {
		h.cache.Forget(last - keep)
	}
	return nil
}

// write runs fn in one store transaction and wakes this process's watchers
// when it commits. Under a dry run (WithDryRun) the transaction runs fn,
// every check of the store included, and is rolled back.
func (h *Hub) write(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	if isDryRun(ctx) {
		err := h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := fn(ctx, tx); err != nil {
				return err
			}
			return errDryRun
		})
		if errors.Is(err, errDryRun) {
			return nil
		}
		return err
	}
	if err := h.st.Update(ctx, fn); err != nil {
		return err
	}
	if h.cache != nil {
		h.cache.Unhanded()
	}
	h.notify.signal()
	return nil
}

// writeHanded is write for a transaction whose every changed instance
// the caller hands to the read cache (committed) once it returns, and
// which changes no relation: an update. The read cache's guesses
// (GuessInstanceByName) stay served after it.
func (h *Hub) writeHanded(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	if isDryRun(ctx) {
		return h.write(ctx, fn)
	}
	if err := h.st.Update(ctx, fn); err != nil {
		return err
	}
	h.notify.signal()
	return nil
}
