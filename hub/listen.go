package hub

import (
	"context"
	"sync"
	"time"
)

// changeListener is a store that tells of commits as they happen, through
// any replica (PostgreSQL's LISTEN/NOTIFY, store/postgres): watchers then
// learn of another replica's write at once instead of at the next poll,
// which stays as the fallback.
type changeListener interface {
	// ListenChanges calls changed with the position of each commit's
	// newest change (0: not known).
	ListenChanges(ctx context.Context, ready func(), changed func(seq int64)) error
}

// listenReadyWait bounds how long a watch waits for the listener to start
// before it relies on polling alone.
const listenReadyWait = 5 * time.Second

// listening runs the store's listener while at least one watch is under
// way, waking this process's watchers at every commit it hears of.
type listening struct {
	mu     sync.Mutex
	n      int
	cancel context.CancelFunc
	ready  chan struct{} // closed once the listener first listens (or gave up)
}

// listen makes sure the store's listener runs for a watch and waits (a
// bounded time) until it listens, so that a commit after listen returns is
// heard of. The returned func ends the watch's claim on it.
func (h *Hub) listen() (release func()) {
	cl, ok := h.st.(changeListener)
	if !ok {
		return func() {}
	}
	l := &h.listening
	l.mu.Lock()
	l.n++
	if l.n == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.ready = cancel, make(chan struct{})
		go h.runListener(ctx, cl, l.ready)
	}
	ready := l.ready
	l.mu.Unlock()
	t := time.NewTimer(listenReadyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n--
		if l.n == 0 {
			l.cancel()
		}
	}
}

// runListener listens until ctx ends, starting again after a failure (the
// watchers poll meanwhile, and are woken once it listens again, since
// commits may have gone unheard).
func (h *Hub) runListener(ctx context.Context, cl changeListener, ready chan struct{}) {
	var once sync.Once
	markReady := func() { once.Do(func() { close(ready) }) }
	defer markReady()
	for ctx.Err() == nil {
		err := cl.ListenChanges(ctx, func() {
			markReady()
			h.notify.signal()
		}, h.notify.signalAt)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("listening for other replicas' changes failed; watchers poll until it listens again", "err", err)
		markReady()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
