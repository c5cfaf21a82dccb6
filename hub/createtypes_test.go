package hub_test

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// TestCreateChecksTheCurrentType: a create checks its value against the
// Type as it is when the create runs, although creates keep the Type they
// checked against: a Type deleted and registered again with another schema,
// through the same hub or another one on the store, is followed by the very
// next create, with the verdict (message included) of a hub that never saw
// the old Type; over each kind of Type matching (typeMatchings). Fails
// when a kept Type decides alone.
func TestCreateChecksTheCurrentType(t *testing.T) {
	ref := cairn.TypeRef{Path: "cap.type.kept.check", Revision: "0.1.0"}
	small := json.RawMessage(smallValue)
	for _, m := range typeMatchings() {
		for _, tc := range typeChanges() {
			t.Run(tc.name+", "+m.name, func(t *testing.T) {
				e, writer := newTypeChangeEnv(t, tc, m, ref)
				create := func(h *hub.Hub, alias string, v json.RawMessage) error {
					_, err := h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: alias, TypeRef: ref, Value: v}}})
					return err
				}
				// The reading hub checks a value against the first schema,
				// and keeps it; then the instance goes, and so does the Type.
				out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "first", TypeRef: ref, Value: small}}})
				if err != nil {
					t.Fatalf("first create: %v", err)
				}
				if err := writer.DeleteInstance(e.ctx, out[0].ID, ""); err != nil {
					t.Fatal(err)
				}
				changeType(t, e, writer, tc, ref)

				// The verdict of a hub that never saw the first schema.
				fresh, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener, Strict: tc.strict})
				if err != nil {
					t.Fatal(err)
				}
				_, want := fresh.CreateInstances(cairn.WithDryRun(e.ctx), hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "second", TypeRef: ref, Value: tc.value}}})

				err = create(e.h, "second", tc.value)
				if tc.wantRejected != (err != nil) {
					t.Fatalf("create after the change: %v, want rejected %t", err, tc.wantRejected)
				}
				if (want != nil) != tc.wantRejected {
					t.Fatalf("the fresh hub's verdict %v, want rejected %t", want, tc.wantRejected)
				}
				if err != nil {
					if !cairn.HasCode(err, cairn.CodeInvalid) || err.Error() != want.Error() {
						t.Fatalf("create after the change: %v, want the fresh hub's %v", err, want)
					}
				}
				// And the hub keeps following: a value the current Type
				// accepts is created.
				if tc.to != "" || !tc.strict {
					if err := create(e.h, "third", small); err != nil {
						t.Fatalf("third create: %v", err)
					}
				}
			})
		}
	}
}

// TestCreateRecheckTakesBackExternalValue: a value that passed the kept
// Type but not the Type the transaction pins (changed by another hub) was
// already sent to its external backend; the create fails as a check on the
// current Type does, and the backend's write is taken back.
func TestCreateRecheckTakesBackExternalValue(t *testing.T) {
	e := newEnv(t)
	other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener})
	if err != nil {
		t.Fatal(err)
	}
	filesID, files := e.addBackend("files", true, "")
	ref := cairn.TypeRef{Path: "cap.type.kept.external", Revision: "0.1.0"}
	apply := func(h *hub.Hub, schema string) {
		t.Helper()
		if _, _, err := h.ApplyType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(schema)}); err != nil {
			t.Fatal(err)
		}
	}
	in := func(alias, value string) hub.NewInstance {
		return hub.NewInstance{Alias: alias, TypeRef: ref, Value: json.RawMessage(value), Backend: &hub.BackendInput{ID: filesID}}
	}
	apply(e.h, `{"type":"object"}`)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{in("first", `{"n":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteInstance(e.ctx, out[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteType(e.ctx, ref); err != nil {
		t.Fatal(err)
	}
	apply(other, `{"type":"object","required":["name"]}`)
	creates, deletes := len(files.called("OnCreate")), len(files.called("OnDelete"))

	_, err = e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{in("second", `{"n":2}`)}})
	_, want := other.CreateInstances(cairn.WithDryRun(e.ctx), hub.CreateRequest{Instances: []hub.NewInstance{in("second", `{"n":2}`)}})
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("create: %v, want the current Type's refusal %v", err, want)
	}
	if got := len(files.called("OnCreate")) - creates; got != 1 {
		t.Fatalf("%d OnCreate calls, want 1 (the kept Type passed the value)", got)
	}
	if got := len(files.called("OnDelete")) - deletes; got != 1 {
		t.Fatalf("%d OnDelete calls, want 1: the refused create's value taken back", got)
	}
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: ref.Path}, false)
	if err != nil || len(list) != 0 {
		t.Fatalf("instances of %s: %v %v, want none", ref, list, err)
	}
}
