package sqlite

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Store's reads run on the reader pool. Reads of one statement need no
// transaction; instance reads take several and run in one snapshot (view).

func (s *Store) pool() reader { return s.rd }

func (s *Store) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	return s.pool().GetType(ctx, ref)
}

func (s *Store) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	return s.pool().ListTypes(ctx, f)
}

// One instance is read with one statement (reader.getOne), consistent
// without a read transaction.

func (s *Store) GetInstances(ctx context.Context, ids []string) (out []cairn.Instance, err error) {
	if len(ids) == 1 {
		return s.pool().GetInstances(ctx, ids)
	}
	err = s.view(ctx, func(r reader) error { out, err = r.GetInstances(ctx, ids); return err })
	return out, err
}

func (s *Store) GetInstancesBrief(ctx context.Context, ids []string) (out []cairn.Instance, err error) {
	if len(ids) == 1 {
		return s.pool().GetInstancesBrief(ctx, ids)
	}
	err = s.view(ctx, func(r reader) error { out, err = r.GetInstancesBrief(ctx, ids); return err })
	return out, err
}

func (s *Store) GetInstanceByName(ctx context.Context, typePath, namespace, name string) (cairn.Instance, error) {
	return s.pool().GetInstanceByName(ctx, typePath, namespace, name)
}

func (s *Store) ListInstances(ctx context.Context, f store.InstanceFilter) (out []cairn.Instance, err error) {
	err = s.view(ctx, func(r reader) error { out, err = r.ListInstances(ctx, f); return err })
	return out, err
}

func (s *Store) CountInstances(ctx context.Context, ref cairn.TypeRef) (int, error) {
	return s.pool().CountInstances(ctx, ref)
}

func (s *Store) ResourceVersions(ctx context.Context, id string) ([]cairn.ResourceVersion, error) {
	return s.pool().ResourceVersions(ctx, id)
}

func (s *Store) ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error) {
	return s.pool().ResourceVersionsOf(ctx, ids)
}

func (s *Store) ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error) {
	return s.pool().ResourceVersion(ctx, id, rv)
}

func (s *Store) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	return s.pool().Value(ctx, id, rv)
}

func (s *Store) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	return s.pool().Values(ctx, keys)
}

func (s *Store) HasValues(ctx context.Context, id string) (bool, error) {
	return s.pool().HasValues(ctx, id)
}

func (s *Store) ValueLock(ctx context.Context, id string) (string, error) {
	return s.pool().ValueLock(ctx, id)
}
