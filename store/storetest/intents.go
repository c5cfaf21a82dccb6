package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func testIntents(t *testing.T, s store.Store) {
	ctx := context.Background()
	t0 := base()
	a := store.Intent{InstanceID: id(701), ResourceVersion: 1, BackendID: id(900), Op: store.IntentCreate,
		Context: json.RawMessage(`{"path":"a"}`), CreatedAt: t0}
	b := store.Intent{InstanceID: id(702), ResourceVersion: 3, BackendID: a.BackendID, Op: store.IntentDelete, OwnerID: "owner-1",
		CreatedAt: t0.Add(time.Second)}
	put := func(in store.Intent) error {
		return s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PutIntent(ctx, in) })
	}
	for _, in := range []store.Intent{a, b} {
		if err := put(in); err != nil {
			t.Fatalf("PutIntent: %v", err)
		}
	}
	// A second writer on the way to the same version is refused.
	if err := put(store.Intent{InstanceID: a.InstanceID, ResourceVersion: 1, BackendID: "x", Op: store.IntentCreate, CreatedAt: t0}); !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		t.Fatalf("PutIntent of the same version: %v, want AlreadyExists", err)
	}
	got, err := s.Intents(ctx, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].InstanceID != a.InstanceID || got[1].InstanceID != b.InstanceID ||
		got[0].Op != store.IntentCreate || got[1].ResourceVersion != 3 || !got[0].CreatedAt.Equal(t0) ||
		got[1].Op != store.IntentDelete || got[1].OwnerID != "owner-1" || got[0].OwnerID != "" ||
		!got[0].NextAttempt.Equal(t0) || !jsonEqual(got[0].Context, a.Context) || got[1].Context != nil {
		t.Fatalf("Intents = %+v", got)
	}
	// Due filters on NextAttempt; a retry moves it and counts.
	next := t0.Add(time.Minute)
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.RetryIntent(ctx, a.InstanceID, 1, "backend down", next)
	}); err != nil {
		t.Fatalf("RetryIntent: %v", err)
	}
	if got, _ := s.Intents(ctx, t0.Add(30*time.Second)); len(got) != 1 || got[0].InstanceID != b.InstanceID {
		t.Fatalf("Intents due before the retry time = %+v", got)
	}
	got, _ = s.Intents(ctx, next)
	if len(got) != 2 || got[0].Attempts != 1 || got[0].LastError != "backend down" || !got[0].NextAttempt.Equal(next) {
		t.Fatalf("after a retry: %+v", got)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.RetryIntent(ctx, id(703), 1, "x", next)
	}); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("RetryIntent of a missing intent: %v", err)
	}
	// Forgetting is idempotent, and a rolled-back intent was never there.
	for range 2 {
		if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.DeleteIntent(ctx, a.InstanceID, 1) }); err != nil {
			t.Fatalf("DeleteIntent: %v", err)
		}
	}
	_ = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutIntent(ctx, store.Intent{InstanceID: id(704), ResourceVersion: 1, BackendID: "x", Op: store.IntentCreate, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		return cairn.Errorf(cairn.CodeInvalid, "roll back")
	})
	if got, _ := s.Intents(ctx, next); len(got) != 1 || got[0].InstanceID != b.InstanceID {
		t.Fatalf("Intents = %+v, want only b", got)
	}
}
