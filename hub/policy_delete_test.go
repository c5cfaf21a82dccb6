package hub_test

import (
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/policy"
)

// A backend the policy names cannot be deleted until the policy changes.
func TestDeleteBackendNamedByPolicy(t *testing.T) {
	e := newEnv(t)
	id, _ := e.addBackend("aws", true, "")
	rules := []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "cap.type.aws.*"}, Backend: policy.BackendRef{ID: id}},
		{TypeRef: policy.TypeRef{Path: "cap.*"}, Backend: policy.BackendRef{ID: cairn.BuiltinBackendID}},
	}
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: rules}}); err != nil {
		t.Fatal(err)
	}
	err := e.h.DeleteInstance(e.ctx, id, "")
	wantCode(t, err, cairn.CodeUsedBy)
	wantContains(t, err, "named by the policy", "typeInstance.rules[0]", "cap.type.aws.*")
	e.get(id)

	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: rules[1:]}}); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatalf("delete once the policy no longer names it: %v", err)
	}
}
