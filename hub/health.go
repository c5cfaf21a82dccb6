package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

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
//
// The health also counts the backend's writes waiting in the intent
// journal (and the latest error recovery had with them); a failed check
// says how many wait.
func (h *Hub) CheckBackend(ctx context.Context, id string) (cairn.StorageBackend, cairn.BackendHealth, error) {
	sb, err := h.StorageBackend(ctx, id)
	if err != nil {
		return sb, cairn.BackendHealth{}, err
	}
	if sb.Abstract || h.inProcessBackend(sb) != nil {
		// The hub's own store, or a backend running inside the hub.
		return sb, cairn.BackendHealth{Status: "SERVING"}, nil
	}
	var health cairn.BackendHealth
	hc, ok := h.opener.(HealthChecker)
	if !ok {
		err = h.withheld(ctx, &cairn.Error{Code: cairn.CodeUnavailable, IDs: []string{sb.ID},
			Msg: fmt.Sprintf("External backend %q: no health check is available for url %q", sb.ID, sb.URL)}, sb.ID, "health check")
	} else if health, err = hc.CheckBackend(ctx, sb); err != nil {
		err = h.externalErr(ctx, sb.ID, "health check", err)
	}
	if perr := h.pendingWrites(ctx, sb.ID, &health); perr != nil {
		return sb, health, errors.Join(err, perr)
	}
	if err != nil && health.PendingWrites > 0 {
		err = fmt.Errorf("%w; %s", err, pendingSummary(health))
	}
	return sb, health, err
}

// pendingWrites fills in the backend's writes waiting in the journal.
func (h *Hub) pendingWrites(ctx context.Context, id string, health *cairn.BackendHealth) error {
	ins, err := h.PendingIntents(ctx)
	if err != nil {
		return err
	}
	var latest time.Time
	for _, in := range ins {
		if in.BackendID != id {
			continue
		}
		health.PendingWrites++
		if in.Attempts > 0 {
			health.RetryingWrites++
			if in.NextAttempt.After(latest) {
				latest, health.LastError = in.NextAttempt, in.LastError
			}
		}
	}
	return nil
}

// pendingSummary says what waits in the journal for a backend.
func pendingSummary(health cairn.BackendHealth) string {
	s := "1 interrupted write waits for recovery"
	if health.PendingWrites != 1 {
		s = fmt.Sprintf("%d interrupted writes wait for recovery", health.PendingWrites)
	}
	if health.RetryingWrites > 0 {
		s += fmt.Sprintf(" (%d failed so far; latest error: %s)", health.RetryingWrites, health.LastError)
	}
	return s
}
