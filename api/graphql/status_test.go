package graphql_test

import (
	"encoding/json"
	"testing"
)

// TestInstanceStatus: status is what the instance's controllers report
// (seed 004: a stack installation's Synced and Ready conditions, the "go-to
// place to see the readiness of the whole environment"), served as REST
// serves it under status without the hub's own fields; null until written.
func TestInstanceStatus(t *testing.T) {
	e := newEnv(t)
	got := e.create([]map[string]any{ti("env", "cap.type.env", "0.1.0", map[string]any{"region": "us-west2"}), ti("plain", "cap.type.env", "0.1.0", map[string]any{})})
	status := `{"conditions":[{"type":"Ready","status":"True","reason":"Available","message":"all 8 children are ready"}],"observedGeneration":1}`
	if _, err := e.h.UpdateStatus(e.ctx, got["env"], json.RawMessage(status), 0); err != nil {
		t.Fatal(err)
	}
	var one struct {
		TypeInstance struct{ Status json.RawMessage }
	}
	e.ok(`query($id: ID!) { typeInstance(id: $id) { status } }`, map[string]any{"id": got["env"]}, &one)
	if string(one.TypeInstance.Status) != status {
		t.Errorf("status = %s, want %s", one.TypeInstance.Status, status)
	}
	var list struct {
		TypeInstances []struct {
			ID     string
			Status json.RawMessage
		}
	}
	e.ok(`{ typeInstances(filter: {typeRef: {path: "cap.type.env"}}) { id status } }`, nil, &list)
	if len(list.TypeInstances) != 2 {
		t.Fatalf("list: %+v", list)
	}
	for _, ti := range list.TypeInstances {
		want := "null"
		if ti.ID == got["env"] {
			want = status
		}
		if string(ti.Status) != want {
			t.Errorf("status of %s in the list = %s, want %s", ti.ID, ti.Status, want)
		}
	}
}
