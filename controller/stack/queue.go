package stack

import (
	"context"
	"sync"
	"time"
)

// queue is a work queue of installation ids in the manner of client-go's
// workqueue: a key is never processed by two workers at once, a key added
// while it is processed is processed again afterwards, and failures are
// retried with exponential backoff.
type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	order      []string
	queued     map[string]bool
	processing map[string]bool
	dirty      map[string]bool
	failures   map[string]int
	closed     bool
}

func newQueue() *queue {
	q := &queue{queued: map[string]bool{}, processing: map[string]bool{}, dirty: map[string]bool{}, failures: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues key unless it is queued already.
func (q *queue) add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.order = append(q.order, key)
	q.cond.Signal()
}

// addAfter queues key after d, or when ctx ends, never.
func (q *queue) addAfter(ctx context.Context, key string, d time.Duration) {
	if d <= 0 {
		q.add(key)
		return
	}
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			q.add(key)
		}
	}()
}

// get blocks for the next key; ok is false once the queue is closed.
func (q *queue) get() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	key, q.order = q.order[0], q.order[1:]
	delete(q.queued, key)
	q.processing[key] = true
	return key, true
}

// done ends the processing of key, queueing it again if it was added
// meanwhile.
func (q *queue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		if !q.queued[key] && !q.closed {
			q.queued[key] = true
			q.order = append(q.order, key)
			q.cond.Signal()
		}
	}
}

// backoff returns the delay before the next retry of key: 200ms doubling
// up to a minute.
func (q *queue) backoff(key string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.failures[key]
	q.failures[key] = n + 1
	d := 200 * time.Millisecond << min(n, 9)
	return min(d, time.Minute)
}

func (q *queue) forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}
