package hub_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// TestUpdateChecksTheCurrentType: an update checks its value against the
// Type as it is at the commit, although updates keep the Type they
// checked against: a Type deleted and registered again with another schema,
// through the same hub or another one on the store, is followed by the very
// next update, with the verdict (message included) of a hub that never saw
// the old Type; over each kind of Type matching (typeMatchings). Fails
// when a kept Type decides alone.
func TestUpdateChecksTheCurrentType(t *testing.T) {
	ref := cairn.TypeRef{Path: "cap.type.kept.update", Revision: "0.1.0"}
	small := json.RawMessage(smallValue)
	for _, m := range typeMatchings() {
		for _, tc := range typeChanges() {
			t.Run(tc.name+", "+m.name, func(t *testing.T) {
				e, writer := newTypeChangeEnv(t, tc, m, ref)
				update := func(h *hub.Hub, ctx context.Context, id string, v json.RawMessage) error {
					_, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: v}})
					return err
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
				changeType(t, e, writer, tc, ref)
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
