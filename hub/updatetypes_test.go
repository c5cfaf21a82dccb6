package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// noMatchStore is a store whose transactions do not match Types (as
// PostgreSQL's): updates read the Type for their check, as before kept
// Types, and pin nothing.
type noMatchStore struct{ store.Store }

type noMatchTx struct{ store.Tx }

func (s noMatchStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, noMatchTx{tx}) })
}

// unsupportedMatchStore is a store whose transactions are TypeMatchers that
// cannot tell (errors.ErrUnsupported), as package atrest's over PostgreSQL:
// updates behave as on noMatchStore.
type unsupportedMatchStore struct{ store.Store }

type unsupportedMatchTx struct{ store.Tx }

func (unsupportedMatchTx) TypeMatches(context.Context, cairn.TypeRef, json.RawMessage, bool) (bool, error) {
	return false, errors.ErrUnsupported
}

func (s unsupportedMatchStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, unsupportedMatchTx{tx}) })
}

// TestUpdateChecksTheCurrentType: an update checks its value against the
// Type as it is at the commit, although updates keep the Type they
// checked against: a Type deleted and registered again with another schema,
// through the same hub or another one on the store, is followed by the very
// next update, with the verdict (message included) of a hub that never saw
// the old Type; on a store that does not match Types too. Fails when a kept
// Type decides alone.
func TestUpdateChecksTheCurrentType(t *testing.T) {
	ref := cairn.TypeRef{Path: "cap.type.kept.update", Revision: "0.1.0"}
	const (
		anyN   = `{"type":"object","properties":{"n":{"type":"integer"}}}`
		smallN = `{"type":"object","properties":{"n":{"type":"integer","maximum":5}}}`
	)
	small, big := json.RawMessage(`{"n":3}`), json.RawMessage(`{"n":9}`)

	for _, matcher := range []string{"", "no TypeMatcher", "TypeMatcher unsupported"} {
		for _, tc := range []struct {
			name         string
			strict       bool
			otherWriter  bool
			from, to     string // to "": the Type is deleted
			value        json.RawMessage
			wantRejected bool
		}{
			{name: "stricter, same hub", from: anyN, to: smallN, value: big, wantRejected: true},
			{name: "stricter, other hub", otherWriter: true, from: anyN, to: smallN, value: big, wantRejected: true},
			{name: "looser, same hub", from: smallN, to: anyN, value: big},
			{name: "looser, other hub", otherWriter: true, from: smallN, to: anyN, value: big},
			{name: "deleted, other hub", otherWriter: true, from: smallN, value: big},
			{name: "deleted, other hub, strict", strict: true, otherWriter: true, from: anyN, value: small, wantRejected: true},
		} {
			name := tc.name
			if matcher != "" {
				name += ", " + matcher
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, func(c *hub.Config) {
					c.Strict = tc.strict
					switch matcher {
					case "no TypeMatcher":
						c.Store = noMatchStore{c.Store}
					case "TypeMatcher unsupported":
						c.Store = unsupportedMatchStore{c.Store}
					}
				})
				// The other hub is not strict, so it can create an
				// instance of an unregistered Type.
				writer := e.h
				if tc.otherWriter {
					other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener})
					if err != nil {
						t.Fatalf("second hub: %v", err)
					}
					writer = other
				}
				update := func(h *hub.Hub, ctx context.Context, id string, v json.RawMessage) error {
					_, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: v}})
					return err
				}
				if _, _, err := e.h.ApplyType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(tc.from)}); err != nil {
					t.Fatal(err)
				}
				// The reading hub checks values against the first schema,
				// and keeps it; then the instance goes, and so does the Type.
				out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "first", TypeRef: ref, Value: small}}})
				if err != nil {
					t.Fatalf("first create: %v", err)
				}
				for range 2 {
					if err := update(e.h, e.ctx, out[0].ID, small); err != nil {
						t.Fatalf("update of the first: %v", err)
					}
				}
				if err := writer.DeleteInstance(e.ctx, out[0].ID, ""); err != nil {
					t.Fatal(err)
				}
				if err := writer.DeleteType(e.ctx, ref); err != nil {
					t.Fatal(err)
				}
				if tc.to != "" {
					if _, _, err := writer.ApplyType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(tc.to)}); err != nil {
						t.Fatal(err)
					}
				}
				out, err = writer.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "second", TypeRef: ref, Value: small}}})
				if err != nil {
					t.Fatalf("second create: %v", err)
				}
				id := out[0].ID

				// The verdict of a hub that never saw the first schema.
				fresh, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener, Strict: tc.strict})
				if err != nil {
					t.Fatal(err)
				}
				want := update(fresh, cairn.WithDryRun(e.ctx), id, tc.value)

				err = update(e.h, e.ctx, id, tc.value)
				if tc.wantRejected != (err != nil) {
					t.Fatalf("update after the change: %v, want rejected %t", err, tc.wantRejected)
				}
				if (want != nil) != tc.wantRejected {
					t.Fatalf("the fresh hub's verdict %v, want rejected %t", want, tc.wantRejected)
				}
				if err != nil {
					if !cairn.HasCode(err, cairn.CodeInvalid) || err.Error() != want.Error() {
						t.Fatalf("update after the change: %v, want the fresh hub's %v", err, want)
					}
				}
				got, err := e.h.GetInstance(e.ctx, id, false)
				if err != nil {
					t.Fatal(err)
				}
				if wantRV := map[bool]int{true: 1, false: 2}[tc.wantRejected]; got.Latest.ResourceVersion != wantRV {
					t.Fatalf("resource version %d after the update, want %d", got.Latest.ResourceVersion, wantRV)
				}
				// And the hub keeps following: a value the current Type
				// accepts is stored.
				if tc.to != "" || !tc.strict {
					if err := update(e.h, e.ctx, id, small); err != nil {
						t.Fatalf("next update: %v", err)
					}
				}
			})
		}
	}
}

// TestUpdateChecksATypeRegisteredMeanwhile: an instance of an unregistered
// Type is updated (a hub that is not strict passes its value) while another
// hub registers the Type, between the update's check and its commit (the
// external backend's call). The transaction checks the value against the
// Type it finds: refused as the new Type refuses it, the backend's revision
// taken back; or stored when the new Type accepts it.
func TestUpdateChecksATypeRegisteredMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		wantRejected bool
	}{
		{name: "refused", schema: `{"type":"object","required":["name"]}`, wantRejected: true},
		{name: "accepted", schema: `{"type":"object","properties":{"n":{"type":"integer"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener})
			if err != nil {
				t.Fatal(err)
			}
			filesID, files := e.addBackend("files", true, "")
			ref := cairn.TypeRef{Path: "cap.type.kept.meanwhile", Revision: "0.1.0"}
			id := e.create(hub.NewInstance{Alias: "x", TypeRef: ref, Value: json.RawMessage(`{"n":1}`), Backend: &hub.BackendInput{ID: filesID}})
			value := json.RawMessage(`{"n":2}`)
			// Two updates first, so that the hub learnt its store matches
			// Types whatever it learns from.
			for range 2 {
				if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: value}}); err != nil {
					t.Fatal(err)
				}
			}
			files.failOn("OnUpdate", func(string) error {
				files.failOn("OnUpdate", nil)
				_, err := other.CreateType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(tc.schema)})
				return err
			})
			updates, undos := len(files.called("OnUpdate")), len(files.called("OnDeleteRevision"))
			_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: value}})
			_, want := other.UpdateInstances(cairn.WithDryRun(e.ctx), []hub.UpdateInstance{{ID: id, Value: value}})
			if got := len(files.called("OnUpdate")) - updates; got != 1 {
				t.Fatalf("%d OnUpdate calls, want 1 (the value passed the check)", got)
			}
			got, gerr := e.h.GetInstance(e.ctx, id, false)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !tc.wantRejected {
				if err != nil || want != nil || got.Latest.ResourceVersion != 4 {
					t.Fatalf("update: %v (the current Type's verdict %v), resource version %d, want 4", err, want, got.Latest.ResourceVersion)
				}
				return
			}
			if err == nil || want == nil || !cairn.HasCode(err, cairn.CodeInvalid) || err.Error() != want.Error() {
				t.Fatalf("update: %v, want the current Type's refusal %v", err, want)
			}
			if got := len(files.called("OnDeleteRevision")) - undos; got != 1 {
				t.Fatalf("%d OnDeleteRevision calls, want 1: the refused update's revision taken back", got)
			}
			if got.Latest.ResourceVersion != 3 {
				t.Fatalf("resource version %d, want 3: nothing stored", got.Latest.ResourceVersion)
			}
		})
	}
}
