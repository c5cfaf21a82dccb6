package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// loaderWait is how long a loader waits for more keys before fetching. The
// elements of a list are resolved concurrently and ask within microseconds
// of each other; a millisecond more per level of nesting costs less than one
// store round trip per element.
const loaderWait = time.Millisecond

// loaderMaxBatch bounds one fetch, keeping its SQL well under SQLite's and
// PostgreSQL's parameter limits.
const loaderMaxBatch = 500

// valueKey names one resource version's value.
type valueKey struct {
	id string
	rv int
}

// loaders are the per-request dataloaders. They make a list's cost a bounded
// number of hub calls instead of a few per element (N+1):
//   - instances: the instances of uses and usedBy, one hub.GetInstances per batch;
//   - values: spec.value, one hub.Values per batch (each backend resolved once);
//   - versions: an instance's resource versions, fetched once per instance
//     and request (first, previous, resourceVersion(n) and resourceVersions
//     share it);
//   - backends: a backend's details, resolved once per backend and request.
type loaders struct {
	instances *loader[string, cairn.Instance]
	values    *loader[valueKey, valueResult]
	versions  *loader[string, []cairn.ResourceVersion]
	backends  *loader[string, cairn.StorageBackend]

	// guard holds the request's authorization decisions (authz.go).
	guard *guard

	// refs holds what the hub needs to read a value (the instance's
	// backend and the version's context) for each value key asked for.
	mu   sync.Mutex
	refs map[valueKey]hub.ValueRef
}

func newLoaders(ctx context.Context, h *hub.Hub) *loaders {
	l := &loaders{refs: map[valueKey]hub.ValueRef{}, guard: newGuard(h)}
	l.instances = newLoader(ctx, loaderWait, loaderMaxBatch, func(ctx context.Context, ids []string) (map[string]cairn.Instance, error) {
		found, err := h.GetInstances(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make(map[string]cairn.Instance, len(found))
		for _, inst := range found {
			out[inst.ID] = inst
		}
		return out, nil
	})
	l.values = newLoader(ctx, loaderWait, loaderMaxBatch, func(ctx context.Context, keys []valueKey) (map[valueKey]valueResult, error) {
		refs := make([]hub.ValueRef, len(keys))
		l.mu.Lock()
		for i, k := range keys {
			refs[i] = l.refs[k]
		}
		l.mu.Unlock()
		vals, err := h.Values(ctx, refs)
		if err != nil && ctx.Err() == nil {
			// An instance of the batch was deleted since it was read (a
			// list racing a delete), or its backend is down: read one by
			// one, so that only the values that cannot be read fail, each
			// with its own error, not every value of the batch.
			return valuesOneByOne(ctx, h, keys, refs), nil
		}
		if err != nil {
			return nil, err
		}
		out := make(map[valueKey]valueResult, len(keys))
		for i, k := range keys {
			out[k] = valueResult{v: vals[i]}
		}
		return out, nil
	})
	l.versions = newLoader(ctx, loaderWait, loaderMaxBatch, func(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
		// One store read for the whole batch; an instance deleted meanwhile
		// is absent and has no versions.
		return h.ResourceVersionsOf(ctx, ids)
	})
	l.backends = newLoader(ctx, loaderWait, loaderMaxBatch, func(ctx context.Context, ids []string) (map[string]cairn.StorageBackend, error) {
		out := make(map[string]cairn.StorageBackend, len(ids))
		for _, id := range ids {
			sb, err := h.StorageBackend(ctx, id)
			if err != nil {
				return nil, err
			}
			out[id] = sb
		}
		return out, nil
	})
	return l
}

// valueResult is one value read, or why it could not be.
type valueResult struct {
	v   json.RawMessage
	err error
}

// valuesOneByOne reads each value on its own, leaving out those whose
// instance or version no longer exists.
func valuesOneByOne(ctx context.Context, h *hub.Hub, keys []valueKey, refs []hub.ValueRef) map[valueKey]valueResult {
	out := make(map[valueKey]valueResult, len(keys))
	for i, k := range keys {
		v, err := h.Values(ctx, refs[i:i+1])
		switch {
		case cairn.HasCode(err, cairn.CodeNotFound):
			continue
		case err != nil:
			out[k] = valueResult{err: err}
		default:
			out[k] = valueResult{v: v[0]}
		}
	}
	return out
}

// value loads the value of one resource version of inst.
func (l *loaders) value(ctx context.Context, inst cairn.Instance, rv cairn.ResourceVersion) (json.RawMessage, error) {
	k := valueKey{id: inst.ID, rv: rv.ResourceVersion}
	l.mu.Lock()
	l.refs[k] = hub.ValueRef{Instance: inst, Version: rv}
	l.mu.Unlock()
	r, found, err := l.values.load(ctx, k)
	if err == nil && !found {
		return nil, cairn.Errorf(cairn.CodeNotFound, "the value of TypeInstance %q resource version %d is gone: the TypeInstance was deleted while it was read", inst.ID, rv.ResourceVersion)
	}
	if err != nil {
		return nil, err
	}
	return r.v, r.err
}

type loadersKey struct{}

func withLoaders(ctx context.Context, l *loaders) context.Context {
	return context.WithValue(ctx, loadersKey{}, l)
}

var errNoLoaders = errors.New("graphql: request context has no loaders (serve through Handler)")

func loadersFrom(ctx context.Context) (*loaders, error) {
	l, ok := ctx.Value(loadersKey{}).(*loaders)
	if !ok {
		return nil, errNoLoaders
	}
	return l, nil
}
