package hub

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn"
)

// HealthChecker is implemented by backend openers that can check a
// backend's health (the gRPC adapter asks grpc.health.v1).
type HealthChecker interface {
	CheckBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.BackendHealth, error)
}

// CheckBackend reports the health of a storage backend instance. The
// built-in backend and the backends the hub runs in-process (gotemplate)
// are SERVING while the hub runs; others are asked through the backend
// opener when it can check health.
func (h *Hub) CheckBackend(ctx context.Context, id string) (cairn.StorageBackend, cairn.BackendHealth, error) {
	sb, err := h.StorageBackend(ctx, id)
	if err != nil {
		return sb, cairn.BackendHealth{}, err
	}
	if sb.Abstract || h.inProcessBackend(sb) != nil {
		// The hub's own store, or a backend running inside the hub.
		return sb, cairn.BackendHealth{Status: "SERVING"}, nil
	}
	hc, ok := h.opener.(HealthChecker)
	if !ok {
		return sb, cairn.BackendHealth{}, &cairn.Error{Code: cairn.CodeUnavailable, IDs: []string{id},
			Msg: fmt.Sprintf("External backend %q: no health check is available for url %q", id, sb.URL)}
	}
	health, err := hc.CheckBackend(ctx, sb)
	if err != nil {
		return sb, health, externalErr(id, "health check", err)
	}
	return sb, health, nil
}
