package hub_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// A Type deleted and registered again under the same revision is checked
// against its new schema, even when its createdAt repeats.
func TestTypeReRegisteredWithSameCreatedAt(t *testing.T) {
	tests := []struct {
		name string
		opts []func(*hub.Config)
		at   time.Time
	}{
		{name: "frozen clock", opts: []func(*hub.Config){func(c *hub.Config) {
			c.Now = func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }
		}}},
		{name: "createdAt given by the caller", at: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			ref := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.1.0"}
			register := func(required string) {
				if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, CreatedAt: tc.at,
					JSONSchema: json.RawMessage(`{"type":"object","required":["` + required + `"]}`)}); err != nil {
					t.Fatal(err)
				}
			}
			register("host")
			id := e.create(hub.NewInstance{TypeRef: ref, Value: json.RawMessage(`{"host":"x"}`)})
			if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
				t.Fatal(err)
			}
			if err := e.h.DeleteType(e.ctx, ref); err != nil {
				t.Fatal(err)
			}
			register("name")
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: json.RawMessage(`{"host":"x"}`)}}})
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, "spec/value must have required property 'name'")
		})
	}
}

// An instance marked as a storage backend cannot be created or updated into
// a value that breaks the storage schema.
func TestStorageBackendValueChecked(t *testing.T) {
	e := newEnv(t)
	attrs := []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}}
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cairn.TypeRef{Path: "cap.type.my.storage", Revision: "0.1.0"}, Attributes: attrs,
		Value: json.RawMessage(`{"url":5,"acceptValue":true,"contextSchema":null}`)}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "spec/value/url must be string")

	id, _ := e.addBackend("ok", true, "")
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"acceptValue":true}`)}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "spec/value must have required property 'url'")
	if _, err := e.h.StorageBackend(e.ctx, id); err != nil {
		t.Errorf("backend unusable after a refused update: %v", err)
	}
}

// ApplyType of the same Type by several replicas at once: one creates it,
// the others find it unchanged; nobody gets an error.
func TestApplyTypeConcurrently(t *testing.T) {
	e := newEnv(t)
	others := make([]*hub.Hub, 4)
	for i := range others {
		h, err := hub.New(e.ctx, hub.Config{Store: e.st})
		if err != nil {
			t.Fatal(err)
		}
		others[i] = h
	}
	ty := cairn.Type{Path: "cap.type.race", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`)}
	type result struct {
		created bool
		err     error
	}
	results := make(chan result, len(others))
	for _, h := range others {
		go func() {
			_, created, err := h.ApplyType(e.ctx, ty)
			results <- result{created, err}
		}()
	}
	created := 0
	for range others {
		r := <-results
		if r.err != nil {
			t.Fatalf("concurrent ApplyType: %v", r.err)
		}
		if r.created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d replicas created the Type, want exactly 1", created)
	}
}
