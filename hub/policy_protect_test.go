package hub_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// The policy is written only through ApplyPolicy, which validates it: every
// generic write of its instance is refused with a pointer to the policy's
// API, and changes nothing.
func TestPolicyInstanceRefusesGenericWrites(t *testing.T) {
	e := newEnv(t)
	filesID, _ := e.addBackend("files", true, "")
	other := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"a"}`)})
	applied, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.*", "", filesID)}}})
	if err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	const missing = "00000000-0000-4000-8000-000000000000"
	bad := json.RawMessage(`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"` + missing + `"}}]}}`)

	tests := []struct {
		name  string
		write func() error
	}{
		{"update the value", func() error {
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: hub.PolicyID, Value: bad}})
			return err
		}},
		{"update labels only", func() error {
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: hub.PolicyID, Labels: map[string]string{"a": "b"}}})
			return err
		}},
		{"batch update with another instance", func() error {
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{
				{ID: other, Value: json.RawMessage(`{"host":"b"}`)}, {ID: hub.PolicyID, Value: bad}})
			return err
		}},
		{"delete", func() error { return e.h.DeleteInstance(e.ctx, hub.PolicyID, "") }},
		{"conditional delete", func() error { return e.h.DeleteInstanceIf(e.ctx, hub.PolicyID, "", applied.Seq) }},
		{"lock", func() error { return e.h.LockInstances(e.ctx, []string{other, hub.PolicyID}, "me") }},
		{"unlock", func() error { return e.h.UnlockInstances(e.ctx, []string{hub.PolicyID}, "me") }},
		{"status", func() error {
			_, err := e.h.UpdateStatus(e.ctx, hub.PolicyID, json.RawMessage(`{"x":1}`), 0)
			return err
		}},
		{"managed fields", func() error {
			_, err := e.h.UpdateManagedFields(e.ctx, hub.PolicyID, "", json.RawMessage(`[]`), 0)
			return err
		}},
		{"create of its Type and name", func() error {
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: hub.PolicyTypeRef(),
				Namespace: hub.SystemNamespace, Name: hub.PolicyName, Value: bad}}})
			return err
		}},
		{"create of its Type elsewhere", func() error {
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: hub.PolicyTypeRef(),
				Namespace: "team-a", Name: "mine", Value: json.RawMessage(`{}`)}}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.snapshot()
			err := tt.write()
			wantCode(t, err, cairn.CodeForbidden)
			wantContains(t, err, "holds the hub's policy", "cairn policy apply", "PUT /apis/hub.cairn.dev/v1/policies/default")
			if after := e.snapshot(); after != before {
				t.Errorf("a refused write changed the hub:\nbefore %s\nafter  %s", before, after)
			}
			doc, err := e.h.GetPolicy(e.ctx)
			if err != nil || doc.ResourceVersion != applied.ResourceVersion || doc.Seq != applied.Seq ||
				doc.Policy.TypeInstance.Rules[0].Backend.ID != filesID {
				t.Errorf("policy after the refusal = %+v, %v; want %+v", doc, err, applied)
			}
		})
	}

	// The policy's own API still writes it, and still validates.
	_, err = e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.*", "", missing)}}})
	wantCode(t, err, cairn.CodeInvalid)
	doc, err := e.h.ApplyPolicy(e.ctx, policy.Policy{})
	if err != nil || doc.ResourceVersion != applied.ResourceVersion+1 {
		t.Fatalf("ApplyPolicy after the refusals = %+v, %v; want version %d", doc, err, applied.ResourceVersion+1)
	}
}

// A lock taken on the policy's instance before generic locks were refused
// cannot be released by anyone now; it must not block the policy's API.
func TestApplyPolicyWritesThroughAStaleLock(t *testing.T) {
	e := newEnv(t)
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Update(e.ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetLockedBy(ctx, []string{hub.PolicyID}, "old-owner")
	}); err != nil {
		t.Fatal(err)
	}
	doc, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.*", "", cairn.BuiltinBackendID)}}})
	if err != nil || doc.ResourceVersion != 2 || len(doc.Policy.TypeInstance.Rules) != 1 {
		t.Fatalf("ApplyPolicy on a locked policy = %+v, %v; want version 2 with one rule", doc, err)
	}
}

// The RBAC objects' instance refuses the status and managed-fields writes
// too, as it refuses updates.
func TestRBACInstanceRefusesStatusAndManagedFields(t *testing.T) {
	e := newEnv(t)
	before := e.snapshot()
	_, err := e.h.UpdateStatus(e.ctx, hub.RBACID, json.RawMessage(`{"x":1}`), 0)
	wantCode(t, err, cairn.CodeForbidden)
	wantContains(t, err, "holds the hub's RBAC objects")
	_, err = e.h.UpdateManagedFields(e.ctx, hub.RBACID, "", json.RawMessage(`[]`), 0)
	wantCode(t, err, cairn.CodeForbidden)
	wantContains(t, err, "holds the hub's RBAC objects")
	if after := e.snapshot(); after != before {
		t.Errorf("a refused write changed the hub:\nbefore %s\nafter  %s", before, after)
	}
}
