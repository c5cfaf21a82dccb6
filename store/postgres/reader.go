package postgres

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Store's reads run on the pool, each as one statement (one snapshot), and
// take no locks.

func (s *Store) rd() reader { return reader{q: s.pool} }

func (s *Store) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	return s.rd().GetType(ctx, ref)
}

func (s *Store) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	return s.rd().ListTypes(ctx, f)
}

func (s *Store) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return s.rd().GetInstances(ctx, ids)
}

func (s *Store) GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	return s.rd().GetInstancesBrief(ctx, ids)
}

func (s *Store) GetInstanceByName(ctx context.Context, typePath, namespace, name string) (cairn.Instance, error) {
	return s.rd().GetInstanceByName(ctx, typePath, namespace, name)
}

func (s *Store) ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error) {
	return s.rd().ListInstances(ctx, f)
}

func (s *Store) CountInstances(ctx context.Context, ref cairn.TypeRef) (int, error) {
	return s.rd().CountInstances(ctx, ref)
}

func (s *Store) ResourceVersions(ctx context.Context, id string) ([]cairn.ResourceVersion, error) {
	return s.rd().ResourceVersions(ctx, id)
}

func (s *Store) ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
	return s.rd().ResourceVersionsOf(ctx, ids)
}

func (s *Store) ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error) {
	return s.rd().ResourceVersion(ctx, id, rv)
}

func (s *Store) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	return s.rd().Value(ctx, id, rv)
}

func (s *Store) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	return s.rd().Values(ctx, keys)
}

func (s *Store) HasValues(ctx context.Context, id string) (bool, error) {
	return s.rd().HasValues(ctx, id)
}

func (s *Store) ValueLock(ctx context.Context, id string) (string, error) {
	return s.rd().ValueLock(ctx, id)
}

func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	return s.rd().Changes(ctx, after, limit)
}

func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	return s.rd().LastSeq(ctx)
}
