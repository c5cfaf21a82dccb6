package hub_test

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

func TestUpdateStatus(t *testing.T) {
	e := newEnv(t)
	id := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.app", Revision: "0.1.0"}, Value: json.RawMessage(`{"a":1}`)})
	before := e.get(id)
	if err := e.h.LockInstances(e.ctx, []string{id}, "someone"); err != nil {
		t.Fatal(err)
	}
	locked := e.get(id)

	got, err := e.h.UpdateStatus(e.ctx, id, json.RawMessage(`{ "conditions": [{"type":"Ready","status":"True"}] }`), locked.Seq)
	if err != nil {
		t.Fatalf("UpdateStatus of a locked instance: %v", err)
	}
	if string(got.Status) != `{"conditions":[{"type":"Ready","status":"True"}]}` {
		t.Errorf("returned status = %s", got.Status)
	}
	after := e.get(id)
	if string(after.Status) != string(got.Status) || after.Latest.ResourceVersion != before.Latest.ResourceVersion || after.Seq <= locked.Seq {
		t.Errorf("after UpdateStatus: status %s, resource version %d (was %d), seq %d (was %d)",
			after.Status, after.Latest.ResourceVersion, before.Latest.ResourceVersion, after.Seq, locked.Seq)
	}
	if string(after.Latest.Value) != `{"a":1}` {
		t.Errorf("value = %s, want it unchanged", after.Latest.Value)
	}

	for _, tt := range []struct {
		name   string
		id     string
		status string
		ifSeq  int64
		code   cairn.Code
	}{
		{"stale seq", id, `{"x":1}`, locked.Seq, cairn.CodeConflict},
		{"not an object", id, `[1]`, 0, cairn.CodeInvalid},
		{"not JSON", id, `{`, 0, cairn.CodeInvalid},
		{"unknown instance", "00000000-0000-4000-8000-000000000099", `{}`, 0, cairn.CodeNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.h.UpdateStatus(e.ctx, tt.id, json.RawMessage(tt.status), tt.ifSeq)
			if !cairn.HasCode(err, tt.code) {
				t.Fatalf("UpdateStatus: %v, want %s", err, tt.code)
			}
			if cur := e.get(id); string(cur.Status) != string(after.Status) || cur.Seq != after.Seq {
				t.Errorf("a refused UpdateStatus changed the instance: status %s seq %d", cur.Status, cur.Seq)
			}
		})
	}

	// nil clears.
	if _, err := e.h.UpdateStatus(e.ctx, id, nil, 0); err != nil {
		t.Fatal(err)
	}
	if cur := e.get(id); cur.Status != nil {
		t.Errorf("status = %s after clearing", cur.Status)
	}
}
