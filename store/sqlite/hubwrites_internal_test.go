package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// hubUpdateTx is the store's part of one REST merge patch of a Flag's
// spec (hub.storeUpdates): read the instance, add its next resource
// version, write its managed fields and metadata, store the new value.
func hubUpdateTx(id string, n int) func(ctx context.Context, tx store.Tx) error {
	return func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetInstancesBrief(ctx, []string{id})
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("instance %s not found", id)
		}
		in := got[0]
		rv := cairn.ResourceVersion{ResourceVersion: in.Latest.ResourceVersion + 1, CreatedBy: "bench", CreatedAt: time.Now()}
		if err := tx.AddResourceVersion(ctx, id, rv); err != nil {
			return err
		}
		managed := json.RawMessage(fmt.Sprintf(`[{"manager":"kubectl","operation":"Update","time":"%d","fieldsV1":{"f:spec":{"f:description":{}}}}]`, n))
		if err := tx.SetManagedFields(ctx, id, managed); err != nil {
			return err
		}
		if err := tx.SetMetadata(ctx, id, in.Labels, in.Annotations); err != nil {
			return err
		}
		return tx.PutValue(ctx, id, rv.ResourceVersion, json.RawMessage(fmt.Sprintf(`{"enabled":true,"description":"update %d"}`, n)))
	}
}

// BenchmarkHubWrites runs the store's part of a REST create and of a REST
// update of a Flag, one writer at a time (so without group commits: the
// statements' own cost, what callgrind counts repeatably), on a store
// holding the Flag Type, the built-in backend and 1,000 Flags.
func BenchmarkHubWrites(b *testing.B) {
	newID := func() string { return uuid.Must(uuid.NewV7()).String() }
	setUp := func(b *testing.B) (*Store, []string) {
		s := groupStore(b)
		ids := make([]string, 1000)
		err := s.Update(b.Context(), func(ctx context.Context, tx store.Tx) error {
			if err := tx.CreateType(ctx, cairn.Type{Path: flag(0).TypeRef.Path, Revision: flag(0).TypeRef.Revision}); err != nil {
				return err
			}
			backend := flag(0)
			backend.ID, backend.Name = cairn.BuiltinBackendID, "builtin"
			if err := tx.CreateInstance(ctx, backend); err != nil {
				return err
			}
			for i := range ids {
				ids[i] = newID()
				if err := hubCreate(ids[i], -1-i)(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return s, ids
	}
	b.Run("create", func(b *testing.B) {
		s, _ := setUp(b)
		n := 0
		for b.Loop() {
			n++
			if err := s.Update(b.Context(), hubCreate(newID(), n)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		s, ids := setUp(b)
		n := 0
		for b.Loop() {
			n++
			if err := s.Update(b.Context(), hubUpdateTx(ids[n%100], n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGroupUpdates runs groups of six of the store's part of a REST
// update (hubUpdateTx) through runGroup, as BenchmarkGroupCommit does
// creates: each group updates six of 100 Flags.
func BenchmarkGroupUpdates(b *testing.B) {
	newID := func() string { return uuid.Must(uuid.NewV7()).String() }
	s := hubStore(b, newID)
	ids := make([]string, 100)
	err := s.Update(b.Context(), func(ctx context.Context, tx store.Tx) error {
		for i := range ids {
			ids[i] = newID()
			if err := hubCreate(ids[i], 10000+i)(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	const size = 6
	n := 0
	cpu0 := cpuTime()
	for b.Loop() {
		group := make([]*writeOp, size)
		for i := range group {
			n++
			group[i] = &writeOp{ctx: b.Context(), fn: hubUpdateTx(ids[n%len(ids)], n), done: make(chan struct{})}
		}
		commitGroup(b, s, group)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/update")
}
