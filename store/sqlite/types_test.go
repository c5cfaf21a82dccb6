package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// GetType keeps what it decoded by the row it came from: a Type deleted
// and registered again with another schema and names, through another
// store on the file, is what the next GetType returns, and a caller
// writing to a Type it got changes nothing the next one gets.
func TestGetTypeFollowsTheRow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "types.db")
	a, b := open(t, path), open(t, path)
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	register := func(s interface {
		Update(context.Context, func(context.Context, store.Tx) error) error
	}, schema, kind string) {
		t.Helper()
		err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			if err := tx.DeleteType(ctx, ref); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
			return tx.CreateType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(schema),
				Names: &cairn.Names{Kind: kind, Plural: "as", ShortNames: []string{"x"}}, CreatedAt: time.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func() cairn.Type {
		t.Helper()
		got, err := a.GetType(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	register(a, `{"type":"object"}`, "A")
	for range 2 { // the first decoded, the second kept
		got := get()
		got.JSONSchema[2] = 'X'
		got.Names.ShortNames[0] = "changed"
	}
	if again := get(); string(again.JSONSchema) != `{"type":"object"}` || again.Names.ShortNames[0] != "x" {
		t.Fatalf("GetType after the caller wrote to its copy = %s %v", again.JSONSchema, again.Names)
	}
	register(b, `{"type":"string"}`, "B")
	if got := get(); string(got.JSONSchema) != `{"type":"string"}` || got.Names.Kind != "B" {
		t.Fatalf("GetType after another store registered the Type again = %s %+v; want the new schema and kind B", got.JSONSchema, got.Names)
	}
}

// TypeMatches holds for a Type's schema and names as GetType returns them,
// and for nothing else: another schema, names set or not, no schema, an
// absent Type.
func TestTypeMatches(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "types.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	withSchema := cairn.Type{Path: "cap.type.m", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type": "object"}`),
		Group: "m.io", Version: "v1", Names: &cairn.Names{Kind: "M", Plural: "ms"}}
	bare := cairn.Type{Path: "cap.type.m", Revision: "0.2.0"}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, withSchema); err != nil {
			return err
		}
		return tx.CreateType(ctx, bare)
	}); err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetType(ctx, withSchema.Ref())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		ref    cairn.TypeRef
		schema json.RawMessage
		named  bool
		want   bool
	}{
		{"as read", withSchema.Ref(), stored.JSONSchema, true, true},
		{"without names", withSchema.Ref(), stored.JSONSchema, false, false},
		{"another schema", withSchema.Ref(), json.RawMessage(`{"type":"string"}`), true, false},
		{"the schema spaced otherwise", withSchema.Ref(), json.RawMessage(`{"type":  "object"}`), true, false},
		{"no schema", withSchema.Ref(), nil, true, false},
		{"bare, as read", bare.Ref(), nil, false, true},
		{"bare, a schema", bare.Ref(), stored.JSONSchema, false, false},
		{"absent", cairn.TypeRef{Path: "cap.type.m", Revision: "9.9.9"}, nil, false, false},
	} {
		var got bool
		if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			var err error
			got, err = tx.(store.TypeMatcher).TypeMatches(ctx, c.ref, c.schema, c.named)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: TypeMatches = %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkPinType: a create's Type pin in its transaction, the Type read
// whole (GetType, the baseline) against matched (TypeMatches), alternated
// in one loop; ns per pin of each.
func BenchmarkPinType(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "types.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	typ := cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1alpha1",
		Names:      &cairn.Names{Kind: "Flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"enabled":{"type":"boolean"},"description":{"type":"string"},"variants":{"type":"array","items":{"type":"object","properties":{"key":{"type":"string"},"attachment":{"type":"object"}},"required":["key"]}}},"required":["enabled"]}`)}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.CreateType(ctx, typ) }); err != nil {
		b.Fatal(err)
	}
	var read, matched time.Duration
	n := 0
	for b.Loop() {
		n++
		if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			// Each first in every other transaction.
			for i := range 2 {
				t0 := time.Now()
				if (i+n)%2 == 0 {
					if _, err := tx.GetType(ctx, typ.Ref()); err != nil {
						return err
					}
					read += time.Since(t0)
					continue
				}
				ok, err := tx.(store.TypeMatcher).TypeMatches(ctx, typ.Ref(), typ.JSONSchema, true)
				if err != nil || !ok {
					b.Fatalf("the Type does not match: %v", err)
				}
				matched += time.Since(t0)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(read.Nanoseconds())/float64(b.N), "read-ns")
	b.ReportMetric(float64(matched.Nanoseconds())/float64(b.N), "matched-ns")
}
