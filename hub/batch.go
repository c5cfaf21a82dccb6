package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
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

// Values reads the value of every ref, in order, from each instance's
// backend, resolving each backend once for the whole batch. It fails on the
// first value that cannot be read.
func (h *Hub) Values(ctx context.Context, refs []ValueRef) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(refs))
	bs := h.newBackendSet()
	for i, r := range refs {
		v, err := h.readValue(ctx, bs, r.Instance, r.Version)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
