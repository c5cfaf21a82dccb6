package graphql_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/policy"
)

func TestPolicyQuery(t *testing.T) {
	e := newEnv(t)
	type result struct {
		Policy struct {
			ResourceVersion int             `json:"resourceVersion"`
			CreatedBy       *string         `json:"createdBy"`
			Document        json.RawMessage `json:"document"`
		} `json:"policy"`
	}
	const q = `{ policy { resourceVersion createdBy createdAt document } }`
	var before result
	e.ok(q, nil, &before)
	if before.Policy.ResourceVersion != 0 {
		t.Errorf("fresh hub: policy resourceVersion %d, want 0", before.Policy.ResourceVersion)
	}

	p := policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{{
		TypeRef: policy.TypeRef{Path: "cap.*"},
		Backend: policy.BackendRef{ID: cairn.BuiltinBackendID, Description: "default"},
	}}}}
	if _, err := e.h.ApplyPolicy(cairn.WithActor(e.ctx, "admin"), p); err != nil {
		t.Fatal(err)
	}
	var after result
	e.ok(q, nil, &after)
	if after.Policy.ResourceVersion != 1 || after.Policy.CreatedBy == nil || *after.Policy.CreatedBy != "admin" {
		t.Errorf("policy after apply = rv %d, createdBy %v", after.Policy.ResourceVersion, after.Policy.CreatedBy)
	}
	if !strings.Contains(string(after.Policy.Document), `"cap.*"`) || !strings.Contains(string(after.Policy.Document), cairn.BuiltinBackendID) {
		t.Errorf("policy document = %s, want the applied rule", after.Policy.Document)
	}
}
