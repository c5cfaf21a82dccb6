package hub

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/policy"
)

// BenchmarkPolicyForCreate reads the policy as a create does, two ways
// alternately in one loop: "store" reads the policy instance from the
// store (what a create did before: the parse is kept by its change either
// way), "kept" as a create does now (the store's change-log position, then
// the kept policy). With a commit between reads (not timed), "kept" reads
// the changes in between first.
func BenchmarkPolicyForCreate(b *testing.B) {
	ctx, h := benchHub(b)
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "cap.*"}, Backend: policy.BackendRef{ID: cairn.BuiltinBackendID}},
	}}}); err != nil {
		b.Fatal(err)
	}
	out, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{
		TypeRef: cairn.TypeRef{Path: "cap.type.test.config", Revision: "0.1.0"}, Value: json.RawMessage(`{"n":0}`)}}})
	if err != nil {
		b.Fatal(err)
	}
	other := out[0].ID
	check := func(cp *compiledPolicy, err error) {
		if err != nil || cp == nil || len(cp.doc.Policy.TypeInstance.Rules) != 1 {
			b.Fatal(cp, err)
		}
	}
	storeVsKept(b, ctx, h, other,
		func() { check(h.currentPolicy(ctx)) },
		func() { check(h.policyAt(ctx, 0)) })
}
