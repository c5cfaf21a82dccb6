package hub

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn"
)

// Dry runs (cairn.WithDryRun): every write takes the same path as a real
// one, inside a real store transaction that write rolls back (watch.go),
// and calls no backend's OnCreate, OnUpdate, OnDelete, OnLock or OnUnlock.
// Reads made on the way (a context-only backend's pre-create value, a
// projection's inputs) still happen.

func isDryRun(ctx context.Context) bool { return cairn.IsDryRun(ctx) }

// errDryRun rolls back a dry run's transaction once fn has succeeded.
var errDryRun = errors.New("dry run: rolled back")
