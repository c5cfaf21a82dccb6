package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
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
