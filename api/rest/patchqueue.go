package rest

import "sync"

// patchQueue lets one PATCH of an object at a time through in this
// process, the others of the same object waiting their turn. Two
// concurrent patches of one object would both read it at the same
// resourceVersion, and the second to commit would fail its conditional
// write and start again: a whole update's work thrown away (a quarter of
// the updates when 16 clients patch 100 objects). Waiting instead, the
// second reads the object as the first left it, from the read cache (the
// first handed it its commit). Nothing else depends on the queue: the
// write stays conditional on what was read, so a write through another
// process, or not through PATCH, still ends in a conflict and a retry.
type patchQueue struct {
	mu sync.Mutex
	m  map[patchKey]*patchTurn
}

type patchKey struct {
	path, namespace, name string
}

type patchTurn struct {
	mu      sync.Mutex
	waiting int // holders and waiters; guarded by patchQueue.mu
}

// wait returns once the caller's turn for key has come; done ends it.
// done may be called more than once.
func (q *patchQueue) wait(key patchKey) (done func()) {
	q.mu.Lock()
	t := q.m[key]
	if t == nil {
		if q.m == nil {
			q.m = map[patchKey]*patchTurn{}
		}
		t = &patchTurn{}
		q.m[key] = t
	}
	t.waiting++
	q.mu.Unlock()
	t.mu.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Unlock()
			q.mu.Lock()
			if t.waiting--; t.waiting == 0 {
				delete(q.m, key)
			}
			q.mu.Unlock()
		})
	}
}
