package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/store/postgres"
)

// Waiting for the store: how long serve waits between attempts to open a
// PostgreSQL database it cannot reach, and how often it repeats the same
// reason in the log.
const (
	storeRetryFirst = 250 * time.Millisecond
	storeRetryMax   = 5 * time.Second
	storeRetryLog   = 30 * time.Second
)

// waitForStore opens the store for serve. While PostgreSQL cannot be
// reached or takes no connections yet (postgres.Unreachable: not up yet,
// restarting, a name not resolving yet) it tries again, 250ms doubling to
// 5s apart, says why in the log and in waiting (which /readyz shows), until
// the store opens or ctx ends (nil, nil): a replica started before its
// database, as in a compose file or a restart of both, serves once the
// database is up instead of exiting. Anything else (a wrong password, a
// missing database or schema, a schema too new, SQLite's errors) is a
// configuration no wait cures and is returned at once.
func (a *app) waitForStore(ctx context.Context, addr string, log *slog.Logger, waiting *atomic.Pointer[string]) (*openedStore, error) {
	delay := storeRetryFirst
	var logged string
	var loggedAt time.Time
	for {
		st, err := a.openStore(ctx, log)
		if err == nil {
			return st, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if a.database == "" || !postgres.Unreachable(err) {
			return nil, err
		}
		msg := "waiting for the store: " + err.Error()
		waiting.Store(&msg)
		if msg != logged || time.Since(loggedAt) >= storeRetryLog {
			log.Warn("waiting for the store", "addr", addr, "err", err.Error(), "retryIn", delay.String())
			logged, loggedAt = msg, time.Now()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		delay = min(2*delay, storeRetryMax)
	}
}

// notStarted answers a request that came before serve's store was open: a
// Kubernetes Status, 503, as the API answers while its store is away.
// Without Retry-After: kubectl would retry it for close to a minute before
// it said anything.
func notStarted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": "cairn is starting: its store is not open yet (see /readyz?verbose)",
		"reason":  "ServiceUnavailable", "code": http.StatusServiceUnavailable,
	})
}
