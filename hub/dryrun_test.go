package hub_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// snapshot is everything a write could change: the change log's head, every
// instance with its latest value, lock and relations, and the Types.
func (e *env) snapshot() string {
	e.t.Helper()
	seq, err := e.h.LastSeq(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	insts, err := e.h.ListInstances(e.ctx, store.InstanceFilter{}, true)
	if err != nil {
		e.t.Fatal(err)
	}
	types, err := e.h.ListTypes(e.ctx, store.TypeFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal([]any{seq, insts, types})
	return string(b)
}

// TestDryRunChangesNothing runs every write of the hub under a dry run and
// asserts it answers as the real write would, refuses what the real write
// refuses, and leaves the store and the external backend untouched.
func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
	bid, f := e.addBackend("ext", true, "")
	ext := e.create(hub.NewInstance{TypeRef: cfgType, Name: "ext", Value: json.RawMessage(`{"host":"a"}`), Backend: &hub.BackendInput{ID: bid}})
	local := e.create(hub.NewInstance{TypeRef: cfgType, Name: "local", Value: json.RawMessage(`{"host":"b"}`)})
	locked := e.create(hub.NewInstance{TypeRef: cfgType, Name: "locked", Value: json.RawMessage(`{"host":"c"}`)})
	if err := e.h.LockInstances(e.ctx, []string{locked}, "alice"); err != nil {
		t.Fatal(err)
	}
	dry := cairn.WithDryRun(e.ctx)
	writes := []struct {
		name string
		do   func() error
		code cairn.Code // the refusal a real write gets too; "" for success
	}{
		{"create in an external backend", func() error {
			out, err := e.h.CreateInstances(dry, hub.CreateRequest{Instances: []hub.NewInstance{
				{TypeRef: cfgType, Name: "new", Value: json.RawMessage(`{"host":"n"}`), Backend: &hub.BackendInput{ID: bid}}}})
			if err == nil && (out[0].ID == "" || out[0].Instance.Name != "new") {
				return fmt.Errorf("dry-run create answered %+v, want the instance as it would be created", out[0])
			}
			return err
		}, ""},
		{"create with an invalid value", func() error {
			_, err := e.h.CreateInstances(dry, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Value: json.RawMessage(`{"port":1}`)}}})
			return err
		}, cairn.CodeInvalid},
		{"create a name that exists (the store's constraint)", func() error {
			_, err := e.h.CreateInstances(dry, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Name: "local", Value: json.RawMessage(`{"host":"x"}`)}}})
			return err
		}, cairn.CodeAlreadyExists},
		{"update an external instance", func() error {
			out, err := e.h.UpdateInstances(dry, []hub.UpdateInstance{{ID: ext, Value: json.RawMessage(`{"host":"z"}`)}})
			if err == nil && out[0].Latest.ResourceVersion != 2 {
				return fmt.Errorf("dry-run update answered resource version %d, want 2", out[0].Latest.ResourceVersion)
			}
			return err
		}, ""},
		{"update a built-in instance", func() error {
			_, err := e.h.UpdateInstances(dry, []hub.UpdateInstance{{ID: local, Value: json.RawMessage(`{"host":"z"}`), Labels: map[string]string{"a": "b"}}})
			return err
		}, ""},
		{"update a locked instance", func() error {
			_, err := e.h.UpdateInstances(dry, []hub.UpdateInstance{{ID: locked, Value: json.RawMessage(`{"host":"z"}`)}})
			return err
		}, cairn.CodeLocked},
		{"update with a stale resourceVersion", func() error {
			_, err := e.h.UpdateInstances(dry, []hub.UpdateInstance{{ID: local, IfSeq: 1, Value: json.RawMessage(`{"host":"z"}`)}})
			return err
		}, cairn.CodeConflict},
		{"update against the schema", func() error {
			_, err := e.h.UpdateInstances(dry, []hub.UpdateInstance{{ID: local, Value: json.RawMessage(`{"host":1}`)}})
			return err
		}, cairn.CodeInvalid},
		{"delete an external instance", func() error { return e.h.DeleteInstance(dry, ext, "") }, ""},
		{"delete a built-in instance", func() error { return e.h.DeleteInstance(dry, local, "") }, ""},
		{"delete a locked instance", func() error { return e.h.DeleteInstance(dry, locked, "bob") }, cairn.CodeLocked},
		{"delete a used backend", func() error { return e.h.DeleteInstance(dry, bid, "") }, cairn.CodeUsedBy},
		{"lock", func() error { return e.h.LockInstances(dry, []string{ext, local}, "bob") }, ""},
		{"lock what another owner holds", func() error { return e.h.LockInstances(dry, []string{locked}, "bob") }, cairn.CodeLocked},
		{"unlock", func() error { return e.h.UnlockInstances(dry, []string{locked}, "alice") }, ""},
		{"status", func() error {
			_, err := e.h.UpdateStatus(dry, local, json.RawMessage(`{"ready":true}`), 0)
			return err
		}, ""},
		{"create a Type", func() error {
			_, err := e.h.CreateType(dry, cairn.Type{Path: "cap.type.dry", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`)})
			return err
		}, ""},
		{"apply a policy", func() error {
			doc, err := e.h.ApplyPolicy(dry, policy.Policy{})
			if err == nil && doc.ResourceVersion != 1 {
				return fmt.Errorf("dry-run policy apply answered resource version %d, want 1", doc.ResourceVersion)
			}
			return err
		}, ""},
		{"create a Type that exists", func() error {
			_, err := e.h.CreateType(dry, cairn.Type{Path: cfgType.Path, Revision: cfgType.Revision, JSONSchema: json.RawMessage(cfgSchema)})
			return err
		}, cairn.CodeAlreadyExists},
	}
	gen := e.h.TypesGeneration()
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			before := e.snapshot()
			calls := len(f.called("On"))
			err := w.do()
			switch {
			case w.code == "" && err != nil:
				t.Fatalf("dry run: %v", err)
			case w.code != "":
				wantCode(t, err, w.code)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("the dry run changed the store:\nbefore %s\nafter  %s", before, after)
			}
			if got := f.called("On"); len(got) != calls {
				t.Errorf("the dry run called the external backend: %v", got[calls:])
			}
		})
	}
	if e.h.TypesGeneration() != gen {
		t.Error("a dry-run Type create changed the Types generation")
	}
	// The backend still holds exactly what the real writes stored.
	v, err := f.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: ext, ResourceVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, v, `{"host":"a"}`)
	if _, err := f.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: ext, ResourceVersion: 2}); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("a dry-run update stored revision 2 in the backend: %v", err)
	}
}
