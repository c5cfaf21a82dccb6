package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func testRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, instance(1, "cap.type.a", "0.1.0", "default", "a"))
	sentinel := errors.New("stop")
	err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		steps := []func() error{
			func() error { return tx.CreateType(ctx, typeOf("cap.type.rolled", "0.1.0")) },
			func() error { return tx.CreateInstance(ctx, instance(2, "cap.type.a", "0.1.0", "default", "b")) },
			func() error { return tx.AddUses(ctx, id(2), id(1)) },
			func() error {
				return tx.AddResourceVersion(ctx, id(1), cairn.ResourceVersion{ResourceVersion: 2, CreatedAt: at(10)})
			},
			func() error { return tx.SetMetadata(ctx, id(1), map[string]string{"x": "y"}, nil) },
			func() error { return tx.SetLockedBy(ctx, []string{id(1)}, "alice") },
			func() error { return tx.PutValue(ctx, id(1), 1, json.RawMessage(`{}`)) },
			func() error { return tx.SetValueLock(ctx, id(1), "alice") },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				t.Errorf("step in rolled back transaction: %v", err)
			}
		}
		return sentinel
	})
	if err != sentinel {
		t.Fatalf("Update = %v, want fn's error unchanged", err)
	}

	if _, err := s.GetType(ctx, cairn.TypeRef{Path: "cap.type.rolled", Revision: "0.1.0"}); cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("type after rollback: %v, want NotFound", err)
	}
	if got, _ := s.GetInstances(ctx, []string{id(2)}); len(got) != 0 {
		t.Errorf("instance created in the rolled back transaction exists")
	}
	got := get(t, s, id(1))
	want := instance(1, "cap.type.a", "0.1.0", "default", "a")
	wantInstance(t, got, want)
	if ok, _ := s.HasValues(ctx, id(1)); ok {
		t.Errorf("value put in the rolled back transaction exists")
	}
	if owner, _ := s.ValueLock(ctx, id(1)); owner != "" {
		t.Errorf("value lock set in the rolled back transaction: %q", owner)
	}

	// A store error returned by fn rolls back the transaction's earlier writes
	// and reaches the caller with its code.
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, instance(3, "cap.type.a", "0.1.0", "default", "c")); err != nil {
			return err
		}
		return tx.CreateInstance(ctx, instance(4, "cap.type.a", "0.1.0", "default", "a"))
	})
	wantCode(t, err, cairn.CodeAlreadyExists)
	if got, _ := s.GetInstances(ctx, []string{id(3)}); len(got) != 0 {
		t.Errorf("instance created before the failing step exists")
	}
}

func testReadOwnWrites(t *testing.T, s store.Store) {
	typ := typeOf("cap.type.a", "0.1.0")
	in := instance(1, "cap.type.a", "0.1.0", "default", "a")
	in.Labels = map[string]string{"k": "v"}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, typ); err != nil {
			return err
		}
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		if err := tx.AddResourceVersion(ctx, in.ID, cairn.ResourceVersion{ResourceVersion: 2, CreatedBy: "bob", CreatedAt: at(10)}); err != nil {
			return err
		}

		if _, err := tx.GetType(ctx, typ.Ref()); err != nil {
			t.Errorf("tx.GetType: %v", err)
		}
		if got, err := tx.ListTypes(ctx, store.TypeFilter{}); err != nil || len(got) != 1 {
			t.Errorf("tx.ListTypes = %d types, %v; want 1", len(got), err)
		}
		if got := get(t, tx, in.ID); got.Latest.ResourceVersion != 2 || got.Labels["k"] != "v" {
			t.Errorf("tx.GetInstances: latest %d, labels %v", got.Latest.ResourceVersion, got.Labels)
		}
		if _, err := tx.GetInstanceByName(ctx, in.TypeRef.Path, in.Namespace, in.Name); err != nil {
			t.Errorf("tx.GetInstanceByName: %v", err)
		}
		if got, err := tx.ListInstances(ctx, store.InstanceFilter{CreatedBy: "bob"}); err != nil || !slices.Equal(ids(got), []string{in.ID}) {
			t.Errorf("tx.ListInstances = %q, %v", ids(got), err)
		}
		if n, err := tx.CountInstances(ctx, in.TypeRef); err != nil || n != 1 {
			t.Errorf("tx.CountInstances = %d, %v", n, err)
		}
		if rvs, err := tx.ResourceVersions(ctx, in.ID); err != nil || len(rvs) != 2 {
			t.Errorf("tx.ResourceVersions = %d versions, %v", len(rvs), err)
		}
		if rv, err := tx.ResourceVersion(ctx, in.ID, 2); err != nil || rv.CreatedBy != "bob" {
			t.Errorf("tx.ResourceVersion = %+v, %v", rv, err)
		}
		if err := tx.SetValueLock(ctx, in.ID, "alice"); err != nil {
			return err
		}
		if owner, err := tx.ValueLock(ctx, in.ID); err != nil || owner != "alice" {
			t.Errorf("tx.ValueLock = %q, %v", owner, err)
		}

		// Nothing is visible outside the transaction before it commits.
		if got, err := s.GetInstances(ctx, []string{in.ID}); err != nil || len(got) != 0 {
			t.Errorf("uncommitted instance visible outside the transaction: %q, %v", ids(got), err)
		}
		if _, err := s.GetType(ctx, typ.Ref()); cairn.ErrorCode(err) != cairn.CodeNotFound {
			t.Errorf("uncommitted type visible outside the transaction: %v", err)
		}
		return nil
	})
	if got := get(t, s, in.ID); got.Latest.ResourceVersion != 2 {
		t.Fatalf("after commit: latest %d, want 2", got.Latest.ResourceVersion)
	}
}

func testTimestamps(t *testing.T, s store.Store) {
	ctx := t.Context()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	created := time.Date(2024, 2, 29, 23, 59, 59, 123456000, zone)
	typ := cairn.Type{Path: "cap.type.t", Revision: "0.1.0", CreatedAt: created}
	in := instance(1, "cap.type.t", "0.1.0", "default", "t")
	in.CreatedAt = created
	in.Latest.CreatedAt = created.Add(time.Microsecond)
	v2 := cairn.ResourceVersion{ResourceVersion: 2, CreatedAt: time.Date(2031, 12, 31, 0, 0, 0, 1000, time.Local)}
	createTypes(t, s, typ)
	create(t, s, in)
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddResourceVersion(ctx, in.ID, v2) })

	check := func(what string, got, want time.Time) {
		t.Helper()
		if !got.Equal(want) {
			t.Errorf("%s = %s, want %s", what, got, want)
		}
		if got.Location() != time.UTC {
			t.Errorf("%s is in %s, want UTC", what, got.Location())
		}
	}
	gotType, err := s.GetType(ctx, typ.Ref())
	if err != nil {
		t.Fatal(err)
	}
	check("type createdAt", gotType.CreatedAt, created)
	got := get(t, s, in.ID)
	check("instance createdAt", got.CreatedAt, created)
	check("latest createdAt", got.Latest.CreatedAt, v2.CreatedAt)
	rv1, err := s.ResourceVersion(ctx, in.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	check("version 1 createdAt", rv1.CreatedAt, in.Latest.CreatedAt)
}

func testJSONRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		doc  json.RawMessage
	}{
		{"nil stays nil", nil},
		{"JSON null stays null", json.RawMessage(`null`)},
		{"object", json.RawMessage(`{ "a": [1, 2.5, "x"], "b": {"c": null, "d": true} }`)},
		{"array", json.RawMessage(`[{"k": "v"}, []]`)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := i + 1
			path := "cap.type.json" + string(rune('a'+i))
			typ := cairn.Type{Path: path, Revision: "0.1.0", JSONSchema: tt.doc, CreatedAt: at(0)}
			in := instance(n, path, "0.1.0", "default", "j")
			in.Latest.Context = tt.doc
			createTypes(t, s, typ)
			create(t, s, in)

			gotType, err := s.GetType(ctx, typ.Ref())
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(gotType.JSONSchema, tt.doc) {
				t.Errorf("type jsonSchema = %q, want %q", gotType.JSONSchema, tt.doc)
			}
			if got := get(t, s, in.ID).Latest.Context; !jsonEqual(got, tt.doc) {
				t.Errorf("latest context = %q, want %q", got, tt.doc)
			}
			rv, err := s.ResourceVersion(ctx, in.ID, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(rv.Context, tt.doc) {
				t.Errorf("version context = %q, want %q", rv.Context, tt.doc)
			}
		})
	}
}
