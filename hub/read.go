package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub/cache"
	"github.com/cairn-dev/cairn/store"
)

// readCache returns the read cache when reads go through it: nil when it
// is disabled, or while WarmReadCache loads it (a read waiting for a load
// of every instance would wait seconds on a large store; the store answers
// it as consistently).
func (h *Hub) readCache() *cache.Cache {
	if h.cache == nil || (h.warming.Load() && !h.cache.Loaded()) {
		return nil
	}
	return h.cache
}

// WarmReadCache loads the read cache now, which the first read through it
// would otherwise do while its caller waits. Reads that arrive meanwhile
// are answered from the store. It returns how many instances the cache
// holds.
func (h *Hub) WarmReadCache(ctx context.Context) (instances int, err error) {
	if h.cache == nil {
		return 0, nil
	}
	h.warming.Store(true)
	defer h.warming.Store(false)
	if err := h.cache.Sync(ctx); err != nil {
		return 0, fmt.Errorf("load the read cache: %w", err)
	}
	return h.cache.Len(), nil
}

// warmInBackground is WarmReadCache for Config.WarmReadCache, logging the
// outcome; on failure the cache loads on first use, as without it.
func (h *Hub) warmInBackground(ctx context.Context) {
	defer close(h.warmed)
	start := time.Now()
	n, err := h.WarmReadCache(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("read cache not loaded; it loads on first use", "err", err)
		}
		return
	}
	h.log.Info("read cache loaded", "instances", n, "duration", time.Since(start).Round(time.Millisecond).String())
}

// Warmed is closed once the read cache's load at start-up
// (Config.WarmReadCache) has ended, loaded or not; without one, at once.
func (h *Hub) Warmed() <-chan struct{} { return h.warmed }

// GetInstance returns an instance; with withValue its latest value is read
// from its backend, so a projection or external resource is current.
func (h *Hub) GetInstance(ctx context.Context, id string, withValue bool) (cairn.Instance, error) {
	if c := h.readCache(); c != nil {
		inst, ok, err := c.Get(ctx, id, withValue)
		if err != nil {
			return cairn.Instance{}, fmt.Errorf("get TypeInstance %q: %w", id, err)
		}
		if !ok {
			return cairn.Instance{}, &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{id},
				Msg: fmt.Sprintf("TypeInstance %q was not found", id)}
		}
		// The cache applied the log up to the store's position when the
		// read began, at least: a backend resolved as of what it applied
		// is current for this read, with no position read of its own.
		return inst, h.fillOne(ctx, &inst, withValue, c.Applied())
	}
	found, err := h.st.GetInstances(ctx, []string{id})
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("get TypeInstance %q: %w", id, err)
	}
	if len(found) == 0 {
		return cairn.Instance{}, &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{id},
			Msg: fmt.Sprintf("TypeInstance %q was not found", id)}
	}
	inst := found[0]
	return inst, h.fillOne(ctx, &inst, withValue, 0)
}

// GetInstanceNotOlderThan is GetInstance as of change-log position min or
// later: what a watch needs for the instance of a change at min. From the
// read cache it costs no store read when the cache has applied min.
func (h *Hub) GetInstanceNotOlderThan(ctx context.Context, id string, min int64, withValue bool) (cairn.Instance, error) {
	c := h.readCache()
	if c == nil {
		return h.GetInstance(ctx, id, withValue)
	}
	inst, ok, err := c.GetNotOlderThan(ctx, id, min, withValue)
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("get TypeInstance %q: %w", id, err)
	}
	if !ok {
		return cairn.Instance{}, &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{id},
			Msg: fmt.Sprintf("TypeInstance %q was not found", id)}
	}
	return inst, h.fillOne(ctx, &inst, withValue, 0)
}

// GetInstanceByName returns the instance of a Type path in a namespace.
func (h *Hub) GetInstanceByName(ctx context.Context, typePath, namespace, name string, withValue bool) (cairn.Instance, error) {
	if c := h.readCache(); c != nil {
		inst, ok, err := c.GetByName(ctx, typePath, namespace, name, withValue)
		if err != nil {
			return cairn.Instance{}, fmt.Errorf("get %s %s/%s: %w", typePath, namespace, name, err)
		}
		if ok {
			return inst, h.fillOne(ctx, &inst, withValue, c.Applied())
		}
		// Absent: the store says so in its own words.
	}
	inst, err := h.st.GetInstanceByName(ctx, typePath, namespace, name)
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("get %s %s/%s: %w", typePath, namespace, name, err)
	}
	return inst, h.fillOne(ctx, &inst, withValue, 0)
}

// GuessInstanceByName returns the instance of a Type path in a namespace
// as the read cache holds it, with its value, without waiting for the
// cache to apply what other processes committed: it may be outdated. ok is
// false when there is no read cache, the cache holds no such instance, or
// the instance's value is not in the built-in backend; the caller reads
// with GetInstanceByName then.
//
// A guess is for an update conditional on it, as Kubernetes' GuaranteedUpdate
// takes its watch cache's object first: UpdateInstance.Current set to the
// guess and IfSeq to its Seq, so that the update's transaction refuses it
// (CodeConflict) when the instance changed since. Whatever else is decided
// on a guess (a refusal, an update found to change nothing) must be decided
// again on a consistent read.
func (h *Hub) GuessInstanceByName(typePath, namespace, name string) (cairn.Instance, bool) {
	c := h.readCache()
	if c == nil {
		return cairn.Instance{}, false
	}
	inst, ok := c.Guess(typePath, namespace, name, true)
	if !ok || !inst.Backend.Abstract || inst.Latest.Value == nil {
		return cairn.Instance{}, false
	}
	return inst, true
}

// fillOne reads inst's latest value when asked for and not read yet; at is
// the change-log position the read of inst was consistent with, 0 when
// unknown.
func (h *Hub) fillOne(ctx context.Context, inst *cairn.Instance, withValue bool, at int64) error {
	if !withValue || (inst.Backend.Abstract && inst.Latest.Value != nil) {
		return nil // not asked for, or the cache had it
	}
	v, err := h.readValue(ctx, h.newBackendSetAt(at), *inst, inst.Latest)
	if err != nil {
		return err
	}
	inst.Latest.Value = v
	return nil
}

// ListInstances lists instances matching f, sorted by type path ascending,
// revision descending, createdAt descending. With withValues each latest
// value is read from its backend, its secret parts replaced by SecretMarker
// (GetInstance, or ListInstancesWith asked for Secrets, shows them).
func (h *Hub) ListInstances(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, error) {
	list, _, err := h.ListInstancesAt(ctx, f, withValues)
	return list, err
}

// ListInstancesAt is ListInstances, also returning a change-log position
// the list is current with (every change up to it is in the list), for a
// list's resourceVersion: a watch from it may repeat a change the list
// shows, but never misses one.
func (h *Hub) ListInstancesAt(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, int64, error) {
	return h.ListInstancesWith(ctx, f, ListOptions{Values: withValues})
}

func (h *Hub) listInstances(ctx context.Context, f store.InstanceFilter, o ListOptions) ([]cairn.Instance, int64, error) {
	withValues, notOlderThan := o.Values, o.NotOlderThan
	var (
		list []cairn.Instance
		seq  int64
		err  error
	)
	c := h.readCache()
	if c != nil && cache.Serves(f) && notOlderThan != nil {
		list, seq, err = c.ListNotOlderThan(ctx, f, withValues, *notOlderThan)
	} else if c != nil && cache.Serves(f) {
		list, seq, err = c.ListAt(ctx, f, withValues)
	} else if seq, err = h.LastSeq(ctx); err == nil {
		list, err = h.st.ListInstances(ctx, f)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list TypeInstances: %w", err)
	}
	if withValues {
		if list, err = h.fillValuesOr(ctx, list, o.Unreadable); err != nil {
			return nil, 0, err
		}
	}
	return list, seq, nil
}

// ListInstancesNotOlderThan is ListInstancesAt for a list that need not
// be the most recent, as Kubernetes' resourceVersion on a list says: with
// min 0 ("0", any) the read cache answers as it is, without asking the
// store for its position; with min > 0 ("N", not older than N) once it has
// applied the change log up to min. The position returned is the one the
// list reflects: below min when the store has not reached min. Without the
// read cache, or for filters it does not serve, the list is consistent
// (which satisfies any min the store has reached).
func (h *Hub) ListInstancesNotOlderThan(ctx context.Context, f store.InstanceFilter, withValues bool, min int64) ([]cairn.Instance, int64, error) {
	return h.ListInstancesWith(ctx, f, ListOptions{Values: withValues, NotOlderThan: &min})
}

// fillValues reads the latest value of every instance and returns the
// list with them. An instance deleted, or being deleted, between the list
// and the read of its value is left out, as a list a moment later would
// leave it: an external backend (Git) forgets its values at the delete,
// before the store forgets the instance, and one delete racing a list must
// not fail the whole list. The delete comes after the list's position, so
// a watch from there still delivers it.
func (h *Hub) fillValues(ctx context.Context, list []cairn.Instance) ([]cairn.Instance, error) {
	return h.fillValuesOr(ctx, list, nil)
}

// fillValuesOr is fillValues; with unreadable set, an instance whose
// external backend is unavailable keeps no value and is passed to it
// (ListOptions.Unreadable).
func (h *Hub) fillValuesOr(ctx context.Context, list []cairn.Instance, unreadable func(cairn.Instance, error)) ([]cairn.Instance, error) {
	var refs []ValueRef
	var at []int
	for i := range list {
		if list[i].Backend.Abstract && list[i].Latest.Value != nil {
			continue // the cache had it
		}
		refs = append(refs, ValueRef{Instance: list[i], Version: list[i].Latest})
		at = append(at, i)
	}
	if len(refs) == 0 {
		return list, nil
	}
	if unreadable != nil {
		// The built-in backend's values in one store read; external ones
		// one at a time, as Values reads them anyway, so that a backend
		// found down is not asked again.
		var builtin, external []int
		for _, i := range at {
			if list[i].Backend.Abstract {
				builtin = append(builtin, i)
			} else {
				external = append(external, i)
			}
		}
		if len(builtin) > 0 {
			refs = refs[:0]
			for _, i := range builtin {
				refs = append(refs, ValueRef{Instance: list[i], Version: list[i].Latest})
			}
			vs, err := h.Values(ctx, refs)
			switch {
			case cairn.HasCode(err, cairn.CodeNotFound):
				external = append(builtin, external...)
			case err != nil:
				return nil, err
			default:
				for j, i := range builtin {
					list[i].Latest.Value = vs[j]
				}
			}
		}
		return h.fillValuesOneByOne(ctx, list, external, unreadable)
	}
	vs, err := h.Values(ctx, refs)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return h.fillValuesOneByOne(ctx, list, at, nil)
	}
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		list[i].Latest.Value = vs[j]
	}
	return list, nil
}

// fillValuesOneByOne is fillValuesOr after a value was not found or a
// backend unavailable: it reads the values at the given positions one at
// a time, leaves out the instances being deleted or gone, and passes those
// of an unavailable external backend to unreadable (when set), asking that
// backend once.
func (h *Hub) fillValuesOneByOne(ctx context.Context, list []cairn.Instance, at []int, unreadable func(cairn.Instance, error)) ([]cairn.Instance, error) {
	gone := map[int]bool{}
	down := map[string]error{} // external backend id: why it is unavailable
	for _, i := range at {
		external := !list[i].Backend.Abstract
		if err, ok := down[list[i].Backend.ID]; ok && external {
			unreadable(list[i], err)
			continue
		}
		vs, err := h.Values(ctx, []ValueRef{{Instance: list[i], Version: list[i].Latest}})
		if err == nil {
			list[i].Latest.Value = vs[0]
			continue
		}
		if unreadable != nil && external && cairn.HasCode(err, cairn.CodeUnavailable) {
			down[list[i].Backend.ID] = err
			unreadable(list[i], err)
			continue
		}
		if !cairn.HasCode(err, cairn.CodeNotFound) {
			return nil, err
		}
		deleted, derr := h.deletedMeanwhile(ctx, list[i].ID)
		if derr != nil {
			return nil, derr
		}
		if !deleted && unreadable != nil && external {
			// Its backend has no value for it (a Git branch rewritten
			// without it): shown without one, with the backend's reason,
			// rather than failing the list of every other instance.
			unreadable(list[i], err)
			continue
		}
		if !deleted {
			return nil, err // not being deleted: the value is missing
		}
		gone[i] = true
	}
	out := make([]cairn.Instance, 0, len(list)-len(gone))
	for i := range list {
		if !gone[i] {
			out = append(out, list[i])
		}
	}
	return out, nil
}

// deletedMeanwhile reports whether an instance whose external value was
// not found is being deleted or gone. A delete removes the value from the
// backend first and the instance from the store next: this hub knows its
// own deletes in between; another process's shows as the store's row
// going soon, so the store is asked again after a moment.
func (h *Hub) deletedMeanwhile(ctx context.Context, id string) (bool, error) {
	const attempts, pause = 3, 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if _, ok := h.deleting.Load(id); ok {
			return true, nil
		}
		found, err := h.st.GetInstances(ctx, []string{id})
		if err != nil {
			return false, fmt.Errorf("list TypeInstances: is %q still there: %w", id, err)
		}
		if len(found) == 0 {
			return true, nil
		}
		if attempt == attempts {
			return false, nil
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// ResourceVersions returns every resource version of an instance, oldest
// first, with values when asked.
func (h *Hub) ResourceVersions(ctx context.Context, id string, withValues bool) ([]cairn.ResourceVersion, error) {
	inst, err := h.GetInstance(ctx, id, false)
	if err != nil {
		return nil, err
	}
	rvs, err := h.st.ResourceVersions(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list resource versions of %q: %w", id, err)
	}
	if withValues {
		bs := h.newBackendSet()
		for i := range rvs {
			v, err := h.readValue(ctx, bs, inst, rvs[i])
			if err != nil {
				return nil, err
			}
			rvs[i].Value = v
		}
	}
	return rvs, nil
}

// ResourceVersion returns one resource version of an instance.
func (h *Hub) ResourceVersion(ctx context.Context, id string, rv int, withValue bool) (cairn.ResourceVersion, error) {
	inst, err := h.GetInstance(ctx, id, false)
	if err != nil {
		return cairn.ResourceVersion{}, err
	}
	v, err := h.st.ResourceVersion(ctx, id, rv)
	if err != nil {
		return cairn.ResourceVersion{}, fmt.Errorf("get resource version %d of %q: %w", rv, id, err)
	}
	if withValue {
		if v.Value, err = h.readValue(ctx, nil, inst, v); err != nil {
			return cairn.ResourceVersion{}, err
		}
	}
	return v, nil
}

// StorageBackend describes a backend instance: its value must satisfy the
// storage schema. It does not connect to the backend.
func (h *Hub) StorageBackend(ctx context.Context, id string) (cairn.StorageBackend, error) {
	b, err := h.resolveBackend(ctx, id, 0, false)
	if err != nil {
		return cairn.StorageBackend{}, err
	}
	return b.StorageBackend, nil
}
