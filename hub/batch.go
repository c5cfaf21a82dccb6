package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Batched reads for façades that resolve many instances at once (GraphQL's
// dataloaders): each costs one store read, or one backend resolution per
// distinct backend, however many instances are asked for.

// GetInstances returns the instances with the given ids that exist, in the
// order of ids, with relations, from one store read. Missing ids are left
// out, not reported: the caller knows which it asked for.
func (h *Hub) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	found, err := h.st.GetInstances(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("get %d TypeInstances: %w", len(ids), err)
	}
	return found, nil
}

// ValueRef names one resource version of an instance whose value to read.
// Instance and Version are what the hub returned earlier (GetInstance,
// ListInstances, ResourceVersions): the backend and the version's context
// come from them.
type ValueRef struct {
	Instance cairn.Instance
	Version  cairn.ResourceVersion
}

// Values reads the value of every ref, in order: the built-in backend's in
// one store read, the others from their backends, resolving each backend
// once for the whole batch. It fails on the first value that cannot be read.
func (h *Hub) Values(ctx context.Context, refs []ValueRef) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(refs))
	var keys []store.ValueKey
	var at []int
	bs := h.newBackendSet()
	for i, r := range refs {
		if r.Instance.Backend.Abstract {
			keys = append(keys, store.ValueKey{InstanceID: r.Instance.ID, ResourceVersion: r.Version.ResourceVersion})
			at = append(at, i)
			continue
		}
		v, err := h.readValue(ctx, bs, r.Instance, r.Version)
		if err != nil {
			// Among many values, which instance's it was: its Type, namespace
			// and name, as a user knows it.
			return nil, fmt.Errorf("read the value of %s %s/%s: %w", r.Instance.TypeRef.Path, r.Instance.Namespace, r.Instance.Name, err)
		}
		out[i] = v
	}
	if len(keys) > 0 {
		vs, err := h.st.Values(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("read %d values: %w", len(keys), err)
		}
		for j, i := range at {
			out[i] = vs[j]
		}
	}
	return out, nil
}

// ResourceVersionsOf returns every resource version (without values) of
// each instance in one store read; instances that do not exist are absent.
func (h *Hub) ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
	out, err := h.st.ResourceVersionsOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list resource versions of %d TypeInstances: %w", len(ids), err)
	}
	return out, nil
}
