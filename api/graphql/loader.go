package graphql

import (
	"context"
	"sync"
	"time"
)

// loader batches and caches loads of one kind for one request (a dataloader).
// gqlgen resolves the elements of a list concurrently, so the loads of a
// whole list arrive within a short window; the loader collects the keys that
// arrive within wait (or until maxBatch) and fetches them with one call.
// Every key is fetched at most once per request, however often it is asked
// for. A loader lives as long as its request: nothing is cached across
// requests, so a read never serves stale data.
type loader[K comparable, V any] struct {
	ctx      context.Context // the request's; fetches outlive no request
	fetch    func(ctx context.Context, keys []K) (map[K]V, error)
	wait     time.Duration
	maxBatch int

	mu    sync.Mutex
	calls map[K]*call[V]
	cur   *batch[K, V]
}

type call[V any] struct {
	ready chan struct{}
	v     V
	found bool
	err   error
}

type batch[K comparable, V any] struct {
	once  sync.Once
	keys  []K
	calls []*call[V]
}

func newLoader[K comparable, V any](ctx context.Context, wait time.Duration, maxBatch int, fetch func(context.Context, []K) (map[K]V, error)) *loader[K, V] {
	return &loader[K, V]{ctx: ctx, fetch: fetch, wait: wait, maxBatch: maxBatch, calls: map[K]*call[V]{}}
}

// load returns the value for k; found is false when the fetch did not
// return k (the thing does not exist).
func (l *loader[K, V]) load(ctx context.Context, k K) (v V, found bool, err error) {
	l.mu.Lock()
	c, ok := l.calls[k]
	if !ok {
		c = &call[V]{ready: make(chan struct{})}
		l.calls[k] = c
		b := l.cur
		if b == nil {
			b = &batch[K, V]{}
			l.cur = b
			time.AfterFunc(l.wait, func() { l.dispatch(b) })
		}
		b.keys = append(b.keys, k)
		b.calls = append(b.calls, c)
		if len(b.keys) >= l.maxBatch {
			l.cur = nil
			go l.dispatch(b)
		}
	}
	l.mu.Unlock()
	select {
	case <-c.ready:
		return c.v, c.found, c.err
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

func (l *loader[K, V]) dispatch(b *batch[K, V]) {
	b.once.Do(func() {
		l.mu.Lock()
		if l.cur == b {
			l.cur = nil
		}
		l.mu.Unlock()
		got, err := l.fetch(l.ctx, b.keys)
		for i, k := range b.keys {
			c := b.calls[i]
			if err != nil {
				c.err = err
			} else {
				c.v, c.found = got[k]
			}
			close(c.ready)
		}
	})
}
