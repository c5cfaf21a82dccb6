package audit

import (
	"context"
	"maps"
	"strconv"
	"sync"
)

// Annotations gather what a handler behind the access guard adds to its
// request's audit event (GraphQL's per-field denials): the guard sees the
// request as a whole, the handler what happened inside it. Safe for
// concurrent use, as GraphQL resolves fields concurrently.
type Annotations struct {
	mu sync.Mutex
	m  map[string]string
	n  map[string]int // values added per key
	// created is the object a create made, as its handler told (Created).
	created struct {
		namespace, name string
		set             bool
	}
}

// maxValues bounds the values kept under one key; the rest are counted.
const maxValues = 10

type annotationsKey struct{}

// WithAnnotations returns ctx carrying a new Annotations.
func WithAnnotations(ctx context.Context) (context.Context, *Annotations) {
	// The maps are made by the first Annotate: most requests add none.
	a := &Annotations{}
	return context.WithValue(ctx, annotationsKey{}, a), a
}

// Annotate adds value under key to the audit event of the request ctx
// belongs to; nothing when there is none (no audit log, in-process
// callers). Values under one key are joined by "; ", at most 10 of them,
// followed by how many more there were. Never pass a value or credential.
func Annotate(ctx context.Context, key, value string) {
	a, ok := ctx.Value(annotationsKey{}).(*Annotations)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m, a.n = map[string]string{}, map[string]int{}
	}
	a.n[key]++
	switch n := a.n[key]; {
	case n == 1:
		a.m[key] = value
	case n <= maxValues:
		a.m[key] += "; " + value
	}
}

// Created tells the audit event of the request ctx belongs to which object
// a create made, its namespace and name as the answer gives them, so that
// the guard need not read them back out of the answer it wrote (a JSON
// decode of the whole object per create); nothing when there is no event.
// A create of several objects does not call it: the guard reads their
// names from the answer's items.
func Created(ctx context.Context, namespace, name string) {
	a, ok := ctx.Value(annotationsKey{}).(*Annotations)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.created.namespace, a.created.name, a.created.set = namespace, name, true
}

// CreatedObject returns what Created was told; ok is false when it was
// not called.
func (a *Annotations) CreatedObject() (namespace, name string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created.namespace, a.created.name, a.created.set
}

// Map returns the annotations gathered, nil when there are none.
func (a *Annotations) Map() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) == 0 {
		return nil
	}
	out := maps.Clone(a.m)
	for k, n := range a.n {
		if n > maxValues {
			out[k] += "; and " + strconv.Itoa(n-maxValues) + " more"
		}
	}
	return out
}
