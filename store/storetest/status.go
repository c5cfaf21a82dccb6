package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func testSetStatus(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	create(t, s, in)
	before := get(t, s, in.ID)

	status := json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}],"observedGeneration":1}`)
	managed := json.RawMessage(`[{"manager":"kubectl","operation":"Apply","fieldsV1":{"f:spec":{}}}]`)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.SetStatus(ctx, in.ID, status); err != nil {
			return err
		}
		return tx.SetManagedFields(ctx, in.ID, managed)
	})
	got := get(t, s, in.ID)
	want := in
	want.Uses, want.UsedBy = nil, nil
	want.Status, want.ManagedFields = status, managed
	wantInstance(t, got, want)
	// Neither is versioned, but both are changes a watcher must see.
	if got.Latest.ResourceVersion != before.Latest.ResourceVersion {
		t.Errorf("resource version = %d after SetStatus, want %d", got.Latest.ResourceVersion, before.Latest.ResourceVersion)
	}
	if got.Seq <= before.Seq {
		t.Errorf("Seq = %d after SetStatus, want > %d", got.Seq, before.Seq)
	}
	changes, err := s.Changes(ctx, before.Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Kind != store.Modified || changes[0].InstanceID != in.ID {
		t.Errorf("changes after SetStatus and SetManagedFields in one transaction = %+v, want one MODIFIED of %s", changes, in.ID)
	}
	// Lists carry them too.
	list, err := s.ListInstances(ctx, store.InstanceFilter{Name: in.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !jsonEqual(list[0].Status, status) || !jsonEqual(list[0].ManagedFields, managed) {
		t.Errorf("ListInstances status, managed fields = %+v", list)
	}

	// nil clears.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.SetStatus(ctx, in.ID, nil); err != nil {
			return err
		}
		return tx.SetManagedFields(ctx, in.ID, nil)
	})
	if got := get(t, s, in.ID); got.Status != nil || got.ManagedFields != nil {
		t.Errorf("status, managed fields = %s, %s after clearing; want none", got.Status, got.ManagedFields)
	}

	// An unknown instance is not found, and the transaction changes nothing.
	for name, set := range map[string]func(context.Context, store.Tx) error{
		"SetStatus":        func(ctx context.Context, tx store.Tx) error { return tx.SetStatus(ctx, id(99), status) },
		"SetManagedFields": func(ctx context.Context, tx store.Tx) error { return tx.SetManagedFields(ctx, id(99), managed) },
	} {
		last, err := s.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Update(ctx, set)
		if !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("%s of an unknown instance: %v, want not found", name, err)
		}
		if now, _ := s.LastSeq(ctx); now != last {
			t.Errorf("%s of an unknown instance moved LastSeq from %d to %d", name, last, now)
		}
	}
	// Invalid JSON is refused.
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetStatus(ctx, in.ID, json.RawMessage(`{"broken"`))
	})
	if !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Errorf("SetStatus with invalid JSON: %v, want invalid", err)
	}
}

func testCreateWithStatus(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	in.Status = json.RawMessage(`{"phase":"Pending"}`)
	in.ManagedFields = json.RawMessage(`[{"manager":"m","operation":"Apply"}]`)
	create(t, s, in)
	want := in
	want.Uses, want.UsedBy = nil, nil
	wantInstance(t, get(t, s, in.ID), want)
	changes, err := s.Changes(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Kind != store.Added {
		t.Errorf("changes of a create with status = %+v, want one ADDED", changes)
	}
}

func testRemoveUses(t *testing.T, s store.Store) {
	a := instance(1, "cap.type.a", "0.1.0", "default", "a")
	b := instance(2, "cap.type.b", "0.1.0", "default", "b")
	create(t, s, a, b)
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddUses(ctx, a.ID, b.ID) })
	if err := s.Update(t.Context(), func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, b.ID) }); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Fatalf("DeleteInstance of a used instance: %v, want used by", err)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.RemoveUses(ctx, a.ID, b.ID); err != nil {
			return err
		}
		// Removing a missing edge is a no-op.
		return tx.RemoveUses(ctx, a.ID, b.ID)
	})
	if got := get(t, s, a.ID); len(got.Uses) != 0 {
		t.Fatalf("uses = %v after RemoveUses, want none", got.Uses)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, b.ID) })
}
