package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// The value table is the built-in backend's own storage: it is keyed by
// instance id and resource version but independent of the instance rows,
// since the backend stores a value before the hub records the instance.

func testValues(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := id(1), id(2)
	values := map[int]json.RawMessage{
		1: json.RawMessage(`{"host": "db.example.com", "port": 5432}`),
		2: json.RawMessage(`"a string"`),
		3: json.RawMessage(`null`),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for rv, v := range values {
			if err := tx.PutValue(ctx, a, rv, v); err != nil {
				return err
			}
		}
		return nil
	})
	for rv, want := range values {
		got, err := s.Value(ctx, a, rv)
		if err != nil {
			t.Fatalf("Value(%d): %v", rv, err)
		}
		if !jsonEqual(got, want) {
			t.Errorf("Value(%d) = %s, want %s", rv, got, want)
		}
	}

	err := try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutValue(ctx, a, 1, json.RawMessage(`{}`)) })
	wantCode(t, err, cairn.CodeAlreadyExists)
	if got, _ := s.Value(ctx, a, 1); !jsonEqual(got, values[1]) {
		t.Fatalf("Value(1) = %s after a failed put, want %s", got, values[1])
	}

	for _, q := range []struct {
		id string
		rv int
	}{{a, 4}, {a, 0}, {b, 1}} {
		_, err := s.Value(ctx, q.id, q.rv)
		wantCode(t, err, cairn.CodeNotFound)
	}
	for _, tt := range []struct {
		id   string
		want bool
	}{{a, true}, {b, false}} {
		got, err := s.HasValues(ctx, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("HasValues(%s) = %t, want %t", tt.id, got, tt.want)
		}
	}

	// Reads through the transaction see its writes.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.PutValue(ctx, b, 1, json.RawMessage(`[1, 2]`)); err != nil {
			return err
		}
		if ok, err := tx.HasValues(ctx, b); err != nil || !ok {
			t.Errorf("tx.HasValues = %t, %v; want true", ok, err)
		}
		if got, err := tx.Value(ctx, b, 1); err != nil || !jsonEqual(got, json.RawMessage(`[1,2]`)) {
			t.Errorf("tx.Value = %s, %v; want [1,2]", got, err)
		}
		return nil
	})
}

func testDeleteValues(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := id(1), id(2)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for rv := 1; rv <= 3; rv++ {
			if err := tx.PutValue(ctx, a, rv, json.RawMessage(`{"rv": 1}`)); err != nil {
				return err
			}
		}
		return tx.PutValue(ctx, b, 1, json.RawMessage(`{}`))
	})

	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteValue(ctx, a, 2) })
	_, err := s.Value(ctx, a, 2)
	wantCode(t, err, cairn.CodeNotFound)
	if _, err := s.Value(ctx, a, 3); err != nil {
		t.Fatalf("Value(3) after deleting 2: %v", err)
	}
	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteValue(ctx, a, 2) })
	wantCode(t, err, cairn.CodeNotFound)

	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteValues(ctx, a) })
	if ok, err := s.HasValues(ctx, a); err != nil || ok {
		t.Fatalf("HasValues after DeleteValues = %t, %v; want false", ok, err)
	}
	if ok, err := s.HasValues(ctx, b); err != nil || !ok {
		t.Fatalf("HasValues of another id after DeleteValues = %t, %v; want true", ok, err)
	}
	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteValues(ctx, a) })
	wantCode(t, err, cairn.CodeNotFound)

	// A deleted revision can be written again.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.PutValue(ctx, a, 1, json.RawMessage(`{"rv": 2}`))
	})
	if got, err := s.Value(ctx, a, 1); err != nil || !jsonEqual(got, json.RawMessage(`{"rv":2}`)) {
		t.Fatalf("Value after rewrite = %s, %v", got, err)
	}
}

func testValueLock(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := id(1), id(2)
	lock := func(id, owner string) {
		t.Helper()
		update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.SetValueLock(ctx, id, owner) })
	}
	want := func(id, owner string) {
		t.Helper()
		got, err := s.ValueLock(ctx, id)
		if err != nil {
			t.Fatalf("ValueLock(%s): %v", id, err)
		}
		if got != owner {
			t.Fatalf("ValueLock(%s) = %q, want %q", id, got, owner)
		}
	}
	want(a, "")
	lock(a, "alice")
	want(a, "alice")
	want(b, "")
	lock(a, "bob") // replaced
	want(a, "bob")
	lock(a, "")
	want(a, "")
	lock(b, "") // clearing an absent lock is fine
	want(b, "")
}

func testValuesBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := id(1), id(2)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, put := range []struct {
			id string
			rv int
			v  string
		}{{a, 1, `{"n":1}`}, {a, 2, `null`}, {b, 1, `"b1"`}} {
			if err := tx.PutValue(ctx, put.id, put.rv, json.RawMessage(put.v)); err != nil {
				return err
			}
		}
		return nil
	})
	keys := []store.ValueKey{{InstanceID: b, ResourceVersion: 1}, {InstanceID: a, ResourceVersion: 2}, {InstanceID: a, ResourceVersion: 1}, {InstanceID: b, ResourceVersion: 1}}
	got, err := s.Values(ctx, keys)
	if err != nil {
		t.Fatalf("Values: %v", err)
	}
	want := []string{`"b1"`, `null`, `{"n":1}`, `"b1"`}
	if len(got) != len(want) {
		t.Fatalf("Values returned %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if !jsonEqual(got[i], json.RawMessage(want[i])) {
			t.Errorf("Values[%d] = %s, want %s (order of keys kept)", i, got[i], want[i])
		}
	}
	if got, err := s.Values(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Values(nil) = %v, %v", got, err)
	}
	_, err = s.Values(ctx, []store.ValueKey{{InstanceID: a, ResourceVersion: 1}, {InstanceID: a, ResourceVersion: 9}})
	wantCode(t, err, cairn.CodeNotFound)
}
