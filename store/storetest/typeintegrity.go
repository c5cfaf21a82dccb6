package storetest

import (
	"context"
	"encoding/json"
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

// testTypeMatches: TypeMatches (an optional interface of a Tx) answers
// whether a Type revision has, byte for byte, the schema GetType returned
// for it and names or none.
func testTypeMatches(t *testing.T, s store.Store) {
	ctx := t.Context()
	plain := typeOf("cap.type.plain", "0.1.0")
	named := typeOf("cap.type.named", "0.1.0")
	named.JSONSchema = json.RawMessage(`{"type": "object",  "properties": {"a": {"type": "string"}}}`)
	named.Names = &cairn.Names{Kind: "Named", Singular: "named", Plural: "nameds"}
	bare := cairn.Type{Path: "cap.type.bare", Revision: "0.1.0", CreatedAt: at(0)}
	createTypes(t, s, plain, named, bare)
	kept := map[string]cairn.Type{}
	for _, typ := range []cairn.Type{plain, named, bare} {
		got, err := s.GetType(ctx, typ.Ref())
		if err != nil {
			t.Fatal(err)
		}
		kept[typ.Path] = got
	}
	for _, tc := range []struct {
		name   string
		ref    cairn.TypeRef
		schema json.RawMessage
		named  bool
		want   bool
	}{
		{"as read", plain.Ref(), kept[plain.Path].JSONSchema, false, true},
		{"named, as read", named.Ref(), kept[named.Path].JSONSchema, true, true},
		{"no schema", bare.Ref(), nil, false, true},
		{"names differ", plain.Ref(), kept[plain.Path].JSONSchema, true, false},
		{"names gone", named.Ref(), kept[named.Path].JSONSchema, false, false},
		{"another schema", plain.Ref(), json.RawMessage(`{"type":"string"}`), false, false},
		{"the same schema spaced otherwise", named.Ref(), json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}}}`), true, false},
		{"a schema where none is", bare.Ref(), kept[plain.Path].JSONSchema, false, false},
		{"none where one is", plain.Ref(), nil, false, false},
		{"another revision", cairn.TypeRef{Path: plain.Path, Revision: "0.2.0"}, kept[plain.Path].JSONSchema, false, false},
		{"not registered", cairn.TypeRef{Path: "cap.type.none", Revision: "0.1.0"}, nil, false, false},
	} {
		var got bool
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			m, ok := tx.(store.TypeMatcher)
			if !ok {
				t.Skip("the store's transactions are not store.TypeMatchers")
			}
			var err error
			got, err = m.TypeMatches(ctx, tc.ref, tc.schema, tc.named)
			return err
		})
		if got != tc.want {
			t.Errorf("%s: TypeMatches(%s) = %v, want %v", tc.name, tc.ref, got, tc.want)
		}
	}
}

// testConcurrentDeleteTypeCreate races DeleteType against transactions that
// pin the Type and create an instance of it, as the hub does: by reading it
// (GetType) or, on a store whose transactions are TypeMatchers, by matching
// it against the schema read before. Exactly one side may win each round:
// the instance exists and the Type stays, or the Type is gone and the
// create saw it gone. A Type deleted under a committed instance is the bug
// this catches.
func testConcurrentDeleteTypeCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	const rounds = 40
	for r := range rounds {
		typ := typeOf(fmt.Sprintf("cap.type.race%d", r), "0.1.0")
		createTypes(t, s, typ)
		kept, err := s.GetType(ctx, typ.Ref())
		if err != nil {
			t.Fatal(err)
		}
		in := instance(1000+r, typ.Path, typ.Revision, "default", "x")
		pin := func(ctx context.Context, tx store.Tx) error {
			if m, ok := tx.(store.TypeMatcher); ok && r%2 == 1 {
				found, err := m.TypeMatches(ctx, typ.Ref(), kept.JSONSchema, false)
				if err == nil && !found {
					err = cairn.Errorf(cairn.CodeNotFound, "type %q not found", typ.Ref())
				}
				return err
			}
			_, err := tx.GetType(ctx, typ.Ref())
			return err
		}

		var wg sync.WaitGroup
		var createErr, deleteErr error
		wg.Go(func() {
			createErr = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				if err := pin(ctx, tx); err != nil {
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
