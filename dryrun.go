package cairn

import "context"

type dryRunKey struct{}

// WithDryRun returns a context under which every write is a dry run, as
// Kubernetes' dryRun=All: the hub takes the write's whole path (validation,
// policy, locks, optimistic concurrency, the store's own constraints, in a
// transaction it rolls back) and answers as the write would, but asks no
// storage backend to store, update, delete or lock anything and writes
// nothing. It travels like the actor, from a façade (or a client, which
// sends it on as dryRun=All) to the hub, since it must reach every write
// the same way.
func WithDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// IsDryRun reports whether ctx asks for a dry run.
func IsDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}
