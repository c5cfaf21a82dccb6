package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// testTypeDeleteUsed: a Type revision with instances is not deleted; the
// error names the Type and nothing changes.
func testTypeDeleteUsed(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := typeOf("cap.type.a", "0.1.0")
	createTypes(t, s, a)
	create(t, s, instance(1, "cap.type.a", "0.1.0", "default", "a"))

	err := try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteType(ctx, a.Ref()) })
	wantCode(t, err, cairn.CodeUsedBy)
	if _, err := s.GetType(ctx, a.Ref()); err != nil {
		t.Fatalf("Type after a refused delete: %v", err)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, id(1)) })
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteType(ctx, a.Ref()) })
}

// testConcurrentDeleteTypeCreate races DeleteType against transactions that
// read the Type and create an instance of it, as the hub does. Exactly one
// side may win each round: the instance exists and the Type stays, or the
// Type is gone and the create saw it gone. A Type deleted under a committed
// instance is the bug this catches.
func testConcurrentDeleteTypeCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	const rounds = 40
	for r := range rounds {
		typ := typeOf(fmt.Sprintf("cap.type.race%d", r), "0.1.0")
		createTypes(t, s, typ)
		in := instance(1000+r, typ.Path, typ.Revision, "default", "x")

		var wg sync.WaitGroup
		var createErr, deleteErr error
		wg.Go(func() {
			createErr = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				if _, err := tx.GetType(ctx, typ.Ref()); err != nil {
					return err
				}
				return tx.CreateInstance(ctx, in)
			})
		})
		wg.Go(func() {
			deleteErr = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				return tx.DeleteType(ctx, typ.Ref())
			})
		})
		wg.Wait()

		switch {
		case createErr == nil && cairn.HasCode(deleteErr, cairn.CodeUsedBy):
			if _, err := s.GetType(ctx, typ.Ref()); err != nil {
				t.Fatalf("round %d: create won but the Type is gone: %v", r, err)
			}
		case deleteErr == nil && cairn.HasCode(createErr, cairn.CodeNotFound):
			if got, err := s.GetInstances(ctx, []string{in.ID}); err != nil || len(got) != 0 {
				t.Fatalf("round %d: delete won but the instance exists: %v, %v", r, got, err)
			}
		default:
			t.Fatalf("round %d: create: %v; delete: %v; want exactly one to win", r, createErr, deleteErr)
		}
		n, err := s.CountInstances(ctx, typ.Ref())
		if err != nil {
			t.Fatal(err)
		}
		if _, terr := s.GetType(ctx, typ.Ref()); cairn.HasCode(terr, cairn.CodeNotFound) && n > 0 {
			t.Fatalf("round %d: %d instance(s) of a deleted Type", r, n)
		}
	}
}
