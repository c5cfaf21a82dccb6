package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func typeOf(path, revision string) cairn.Type {
	return cairn.Type{Path: path, Revision: revision, JSONSchema: json.RawMessage(`{"type":"object"}`), CreatedAt: at(0)}
}

func createTypes(t *testing.T, s store.Store, ts ...cairn.Type) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, typ := range ts {
			if err := tx.CreateType(ctx, typ); err != nil {
				return err
			}
		}
		return nil
	})
}

func wantType(t *testing.T, got, want cairn.Type) {
	t.Helper()
	if got.Path != want.Path || got.Revision != want.Revision || got.Group != want.Group || got.Version != want.Version ||
		!jsonEqual(got.JSONSchema, want.JSONSchema) || !slices.Equal(got.AdditionalRefs, want.AdditionalRefs) ||
		!got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("type = %+v, want %+v", got, want)
	}
	switch {
	case (got.Names == nil) != (want.Names == nil):
		t.Fatalf("type names = %+v, want %+v", got.Names, want.Names)
	case got.Names != nil && (got.Names.Kind != want.Names.Kind || got.Names.Singular != want.Names.Singular ||
		got.Names.Plural != want.Names.Plural || !slices.Equal(got.Names.ShortNames, want.Names.ShortNames) ||
		!slices.Equal(got.Names.Categories, want.Names.Categories)):
		t.Fatalf("type names = %+v, want %+v", *got.Names, *want.Names)
	}
	if !slices.Equal(got.PrinterColumns, want.PrinterColumns) {
		t.Fatalf("type printer columns = %+v, want %+v", got.PrinterColumns, want.PrinterColumns)
	}
}

func testTypeCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := cairn.Type{
		Path:           "cap.type.database.postgresql.config",
		Revision:       "0.1.0",
		JSONSchema:     json.RawMessage(`{"type": "object", "properties": {"host": {"type": "string"}}}`),
		AdditionalRefs: []string{"cap.core.type.generic.value", "cap.type.database.config"},
		Group:          "database.cairn.dev",
		Version:        "v1alpha1",
		Names: &cairn.Names{Kind: "PostgresConfig", Singular: "postgresconfig", Plural: "postgresconfigs", ShortNames: []string{"pgc"},
			Categories: []string{"all", "databases"}},
		PrinterColumns: []cairn.PrinterColumn{
			{Name: "Host", Type: "string", JSONPath: ".spec.host", Description: "Where the database listens."},
			{Name: "Port", Type: "integer", Format: "int32", JSONPath: ".spec.port", Priority: 1},
		},
		CreatedAt: at(1),
	}
	bare := cairn.Type{Path: "cap.type.bare", Revision: "1.0.0", CreatedAt: at(2)}
	createTypes(t, s, full, bare)

	for _, want := range []cairn.Type{full, bare} {
		got, err := s.GetType(ctx, want.Ref())
		if err != nil {
			t.Fatalf("GetType(%s): %v", want.Ref(), err)
		}
		wantType(t, got, want)
	}

	// Another revision of the same path is a different Type.
	createTypes(t, s, cairn.Type{Path: full.Path, Revision: "0.2.0", CreatedAt: at(3)})

	err := try(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateType(ctx, cairn.Type{Path: full.Path, Revision: full.Revision, CreatedAt: at(4)})
	})
	wantCode(t, err, cairn.CodeAlreadyExists)
	got, err := s.GetType(ctx, full.Ref())
	if err != nil {
		t.Fatal(err)
	}
	wantType(t, got, full) // the failed create changed nothing

	for _, ref := range []cairn.TypeRef{
		{Path: "cap.type.missing", Revision: "0.1.0"},
		{Path: full.Path, Revision: "9.9.9"},
	} {
		_, err := s.GetType(ctx, ref)
		wantCode(t, err, cairn.CodeNotFound)
	}
}

func testTypeList(t *testing.T, s store.Store) {
	ctx := t.Context()
	rest := func(typ cairn.Type, group, version string) cairn.Type {
		typ.Group, typ.Version = group, version
		typ.Names = &cairn.Names{Kind: "X", Plural: "xs"}
		return typ
	}
	withRefs := func(typ cairn.Type, refs ...string) cairn.Type {
		typ.AdditionalRefs = refs
		return typ
	}
	createTypes(t, s,
		typeOf("cap.type.db", "0.9.0"),
		rest(typeOf("cap.type.db", "0.10.0"), "db.cairn.dev", "v1"),
		typeOf("cap.type.db", "0.1.0"),
		withRefs(typeOf("cap.type.db.pg", "1.0.0"), "cap.type.db", "cap.core.generic"),
		typeOf("cap.type.dbx", "1.0.0"), // shares a string prefix with cap.type.db, not a path prefix
		rest(typeOf("cap.type.cache", "2.0.0"), "db.cairn.dev", "v2"),
		rest(withRefs(typeOf("cap.other", "1.0.0-rc.1"), "cap.core.generic"), "other.cairn.dev", "v1"),
	)
	key := func(ts []cairn.Type) []string {
		out := make([]string, len(ts))
		for i, typ := range ts {
			out[i] = typ.Ref().String()
		}
		return out
	}
	tests := []struct {
		name string
		f    store.TypeFilter
		want []string
	}{
		{"all sorted by path asc, revision desc", store.TypeFilter{}, []string{
			"cap.other:1.0.0-rc.1", "cap.type.cache:2.0.0",
			"cap.type.db:0.10.0", "cap.type.db:0.9.0", "cap.type.db:0.1.0",
			"cap.type.db.pg:1.0.0", "cap.type.dbx:1.0.0",
		}},
		{"path prefix", store.TypeFilter{PathPrefix: "cap.type.db"}, []string{
			"cap.type.db:0.10.0", "cap.type.db:0.9.0", "cap.type.db:0.1.0", "cap.type.db.pg:1.0.0",
		}},
		{"path prefix with .*", store.TypeFilter{PathPrefix: "cap.type.db.*"}, []string{
			"cap.type.db:0.10.0", "cap.type.db:0.9.0", "cap.type.db:0.1.0", "cap.type.db.pg:1.0.0",
		}},
		{"path prefix of a leaf", store.TypeFilter{PathPrefix: "cap.type.db.pg"}, []string{"cap.type.db.pg:1.0.0"}},
		{"path prefix node", store.TypeFilter{PathPrefix: "cap.type"}, []string{
			"cap.type.cache:2.0.0", "cap.type.db:0.10.0", "cap.type.db:0.9.0", "cap.type.db:0.1.0",
			"cap.type.db.pg:1.0.0", "cap.type.dbx:1.0.0",
		}},
		{"path prefix no match", store.TypeFilter{PathPrefix: "cap.type.d"}, nil},
		{"parent", store.TypeFilter{Parent: "cap.core.generic"}, []string{"cap.other:1.0.0-rc.1", "cap.type.db.pg:1.0.0"}},
		{"parent and prefix", store.TypeFilter{Parent: "cap.core.generic", PathPrefix: "cap.type"}, []string{"cap.type.db.pg:1.0.0"}},
		{"group", store.TypeFilter{Group: "db.cairn.dev"}, []string{"cap.type.cache:2.0.0", "cap.type.db:0.10.0"}},
		{"group and version", store.TypeFilter{Group: "db.cairn.dev", Version: "v2"}, []string{"cap.type.cache:2.0.0"}},
		{"version", store.TypeFilter{Version: "v1"}, []string{"cap.other:1.0.0-rc.1", "cap.type.db:0.10.0"}},
		{"no match", store.TypeFilter{Group: "nope"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListTypes(ctx, tt.f)
			if err != nil {
				t.Fatalf("ListTypes: %v", err)
			}
			if !slices.Equal(key(got), tt.want) {
				t.Fatalf("ListTypes(%+v) = %q, want %q", tt.f, key(got), tt.want)
			}
		})
	}

	// Listed Types carry every field.
	got, err := s.ListTypes(ctx, store.TypeFilter{PathPrefix: "cap.other"})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListTypes(cap.other) = %v, %v", got, err)
	}
	wantType(t, got[0], rest(withRefs(typeOf("cap.other", "1.0.0-rc.1"), "cap.core.generic"), "other.cairn.dev", "v1"))
}

func testTypeDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := typeOf("cap.type.a", "0.1.0"), typeOf("cap.type.a", "0.2.0")
	a.AdditionalRefs = []string{"cap.core.parent"}
	createTypes(t, s, a, b)
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteType(ctx, a.Ref()) })

	_, err := s.GetType(ctx, a.Ref())
	wantCode(t, err, cairn.CodeNotFound)
	if _, err := s.GetType(ctx, b.Ref()); err != nil {
		t.Fatalf("other revision: %v", err)
	}
	if got, err := s.ListTypes(ctx, store.TypeFilter{Parent: "cap.core.parent"}); err != nil || len(got) != 0 {
		t.Fatalf("ListTypes(parent) after delete = %v, %v; want none", got, err)
	}
	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteType(ctx, a.Ref()) })
	wantCode(t, err, cairn.CodeNotFound)

	// The revision can be created again.
	createTypes(t, s, a)
}
