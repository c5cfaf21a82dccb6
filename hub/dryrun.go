package hub

import (
	"context"
	"errors"
)

// dryRunKey marks a context whose writes are dry runs.
type dryRunKey struct{}

// WithDryRun returns a context under which every write of the hub is a dry
// run, as Kubernetes' dryRun=All: the write takes the same path as a real
// one (validation, policy, locks, optimistic concurrency, the store's own
// constraints, inside a real transaction) and answers as it would, but no
// backend is asked to store, update, delete or lock anything and the
// transaction is rolled back. Reads made on the way (a context-only
// backend's pre-create value, a projection's inputs) still happen.
//
// It is a context value rather than a field of each request because it
// must reach every write the same way, through the one code path the real
// write takes.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// IsDryRun reports whether ctx asks for a dry run.
func IsDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}

// errDryRun rolls back a dry run's transaction once fn has succeeded.
var errDryRun = errors.New("dry run: rolled back")
