package hub_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

func rule(path, rev, backend string) policy.Rule {
	return policy.Rule{TypeRef: policy.TypeRef{Path: path, Revision: rev}, Backend: policy.BackendRef{ID: backend}}
}

// The "done when": cap.type.aws.* goes to an external backend,
// everything else to the built-in one, and creates that name no backend land
// where the policy says.
func TestPolicyPicksBackends(t *testing.T) {
	e := newEnv(t)
	filesID, files := e.addBackend("files", true, "")
	if doc, err := e.h.GetPolicy(e.ctx); err != nil || doc.ResourceVersion != 0 || len(doc.Policy.TypeInstance.Rules) != 0 {
		t.Fatalf("GetPolicy before any apply = %+v, %v; want empty, version 0", doc, err)
	}
	doc, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		rule("cap.type.aws.*", "", "files"), // by alias: stored as the id
		rule("cap.*", "", cairn.BuiltinBackendAlias),
	}}})
	if err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	if doc.ResourceVersion != 1 || doc.Policy.TypeInstance.Rules[0].Backend.ID != filesID || doc.Policy.TypeInstance.Rules[1].Backend.ID != cairn.BuiltinBackendID {
		t.Fatalf("applied policy = %+v; want version 1 with aliases replaced by ids", doc)
	}

	aws := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}, Value: json.RawMessage(`{"key":"k"}`)})
	other := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.gcp.sa", Revision: "0.1.0"}, Value: json.RawMessage(`{"sa":"s"}`)})
	explicit := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.aws.s3", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
		Backend: &hub.BackendInput{ID: cairn.BuiltinBackendID}})
	if got := e.get(aws); got.Backend.ID != filesID || !slices.Contains(got.Uses, filesID) {
		t.Errorf("aws instance backend = %s uses %v, want the files backend %s", got.Backend.ID, got.Uses, filesID)
	}
	if len(files.called("OnCreate")) != 1 {
		t.Errorf("files backend OnCreate calls = %v, want one", files.called("OnCreate"))
	}
	if got := e.get(other); got.Backend.ID != cairn.BuiltinBackendID {
		t.Errorf("other instance backend = %s, want built-in", got.Backend.ID)
	}
	if got := e.get(explicit); got.Backend.ID != cairn.BuiltinBackendID {
		t.Errorf("an explicit backend must win over the policy; got %s", got.Backend.ID)
	}

	ex, err := e.h.ExplainPolicy(e.ctx, "cap.type.aws.rds", "")
	if err != nil || !ex.Matched || ex.BackendID != filesID || ex.RuleIndex != 0 || ex.BackendAlias != "files" || ex.PolicyVersion != 1 {
		t.Errorf("ExplainPolicy(cap.type.aws.rds) = %+v, %v", ex, err)
	}
	ex, err = e.h.ExplainPolicy(e.ctx, "org.example.x", "1.0.0")
	if err != nil || ex.Matched || ex.BackendID != cairn.BuiltinBackendID {
		t.Errorf("ExplainPolicy(org.example.x) = %+v, %v; want no match, built-in", ex, err)
	}
	_, err = e.h.ExplainPolicy(e.ctx, "Not A Path", "")
	wantCode(t, err, cairn.CodeInvalid)

	// A new apply is a new resource version; history is the instance's.
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{}); err != nil {
		t.Fatal(err)
	}
	rvs, err := e.h.ResourceVersions(e.ctx, hub.PolicyID, true)
	if err != nil || len(rvs) != 2 {
		t.Fatalf("policy history = %d versions, %v; want 2", len(rvs), err)
	}
	later := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)})
	if got := e.get(later); got.Backend.ID != cairn.BuiltinBackendID {
		t.Errorf("after an empty policy, backend = %s, want built-in (the cached policy must follow the new version)", got.Backend.ID)
	}
}

func TestPolicyValidationListsEveryBadRule(t *testing.T) {
	e := newEnv(t)
	filesID, _ := e.addBackend("files", true, "")
	ctxID, _ := e.addBackend("needs-bucket", true, `{"type":"object","required":["bucket"],"properties":{"bucket":{"type":"string"}}}`)
	plain := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.x", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)})
	const missing = "00000000-0000-4000-8000-000000000000"

	tests := []struct {
		name  string
		p     policy.Policy
		field string // "" when the policy is valid
		msg   string
	}{
		{"valid", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", filesID), rule("cap.*", "", filesID)}}}, "", ""},
		{"unknown backend id", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.a", "", missing)}}},
			"typeInstance/rules/0/backend/id", "was not found"},
		{"unknown alias", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.a", "", "nope")}}},
			"typeInstance/rules/0/backend/id", "neither the id nor the alias"},
		{"not a storage backend", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.a", "", plain)}}},
			"typeInstance/rules/0/backend/id", "is not a storage backend"},
		{"catch-all needs context", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.*", "", ctxID)}}},
			"typeInstance/rules/0/backend/id", "requires a context"},
		{"star needs context", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("*", "", ctxID)}}},
			"typeInstance/rules/0/backend/id", "requires a context"},
		{"non-catch-all may need context", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.s3.*", "", ctxID)}}}, "", ""},
		{"injected id missing", policy.Policy{Interface: policy.InterfacePolicy{Default: &policy.Defaults{Inject: &policy.Inject{
			RequiredTypeInstances: []policy.RequiredTypeInstance{{ID: plain}, {ID: missing, Description: "Helm storage"}}}}}},
			"interface/default/inject/requiredTypeInstances/1/id", "was not found"},
		{"override injected id missing", policy.Policy{Interface: policy.InterfacePolicy{Rules: []policy.InterfaceRule{{
			Interface: policy.TypeRef{Path: "cap.interface.db.install"},
			OneOf:     []policy.ImplementationRule{{Inject: &policy.Inject{RequiredTypeInstances: []policy.RequiredTypeInstance{{ID: missing}}}}}}}}},
			"interface/rules/0/oneOf/0/inject/requiredTypeInstances/0/id", "was not found"},
		{"syntax", policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.*", "0.1.0", filesID)}}},
			"typeInstance/rules/0/typeRef/revision", "needs an exact path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.h.ApplyPolicy(e.ctx, tt.p)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ApplyPolicy: %v", err)
				}
				return
			}
			wantCode(t, err, cairn.CodeInvalid)
			causes := cairn.Causes(err)
			if len(causes) != 1 || causes[0].Field != tt.field {
				t.Fatalf("causes = %v, want one at %s", causes, tt.field)
			}
			wantContains(t, err, tt.msg)
		})
	}

	// Every bad rule of one policy is reported, and nothing is stored.
	before, _ := e.h.GetPolicy(e.ctx)
	_, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		rule("cap.type.a", "", missing), rule("cap.type.b", "", filesID), rule("cap.type.c", "", plain), rule("cap.*", "", ctxID)}}})
	wantCode(t, err, cairn.CodeInvalid)
	var fields []string
	for _, c := range cairn.Causes(err) {
		fields = append(fields, c.Field)
	}
	want := []string{"typeInstance/rules/0/backend/id", "typeInstance/rules/2/backend/id", "typeInstance/rules/3/backend/id"}
	if !slices.Equal(fields, want) {
		t.Errorf("causes at %v, want %v", fields, want)
	}
	if after, _ := e.h.GetPolicy(e.ctx); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a refused apply stored version %d (was %d)", after.ResourceVersion, before.ResourceVersion)
	}
}

// A backend the policy picks that is gone fails the create, and the error
// names the rule.
func TestPolicyBackendGoneNamesTheRule(t *testing.T) {
	e := newEnv(t)
	filesID, _ := e.addBackend("files", true, "")
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", filesID)}}}); err != nil {
		t.Fatal(err)
	}
	// The hub refuses to delete a backend the policy names, so remove it
	// behind the hub's back, as an older replica or a hand edit could.
	if err := e.st.Update(e.ctx, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, filesID) }); err != nil {
		t.Fatal(err)
	}
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cairn.TypeRef{Path: "cap.type.aws.s3", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)}}})
	wantCode(t, err, cairn.CodeNotFound)
	wantContains(t, err, "the policy's rule 0 (typeRef cap.type.aws.*) picks backend")
}

// The policy a create reads is kept in memory by change number: a policy
// applied, changed or emptied through this hub or another on the store is
// seen by the very next create of either (it fails when the kept policy is
// not dropped by the policy instance's change).
func TestPolicyChangeSeenByNextCreate(t *testing.T) {
	e := newEnv(t)
	other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener})
	if err != nil {
		t.Fatalf("second hub: %v", err)
	}
	filesID, _ := e.addBackend("files", true, "")
	ref := cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}
	n := 0
	backendOf := func(h *hub.Hub) string {
		t.Helper()
		n++
		out, err := h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatalf("create %d: %v", n, err)
		}
		return out[0].Instance.Backend.ID
	}
	toFiles := policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", filesID)}}}
	for _, tc := range []struct {
		name           string
		writer, reader *hub.Hub
	}{{"same hub", e.h, e.h}, {"other hub", other, e.h}, {"other hub, reversed", e.h, other}} {
		t.Run(tc.name, func(t *testing.T) {
			// Both hubs read (and keep) the current policy first.
			for _, h := range []*hub.Hub{e.h, other} {
				if got := backendOf(h); got != cairn.BuiltinBackendID {
					t.Fatalf("before the apply: backend %s, want built-in", got)
				}
			}
			if _, err := tc.writer.ApplyPolicy(e.ctx, toFiles); err != nil {
				t.Fatal(err)
			}
			if got := backendOf(tc.reader); got != filesID {
				t.Fatalf("after the apply: backend %s, want the policy's %s", got, filesID)
			}
			if _, err := tc.writer.ApplyPolicy(e.ctx, policy.Policy{}); err != nil {
				t.Fatal(err)
			}
			if got := backendOf(tc.reader); got != cairn.BuiltinBackendID {
				t.Fatalf("after the policy was emptied: backend %s, want built-in", got)
			}
		})
	}
}

// The policy is read when an instance is created; instances that exist keep
// their backend when it changes, through updates too (docs/policy.md).
func TestPolicyChangeLeavesExistingInstances(t *testing.T) {
	e := newEnv(t)
	filesID, _ := e.addBackend("files", true, "")
	ref := cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}
	id := e.create(hub.NewInstance{TypeRef: ref, Value: json.RawMessage(`{"v":1}`)})
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.*", "", filesID)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"v":2}`)}}); err != nil {
		t.Fatal(err)
	}
	got := e.get(id)
	if got.Backend.ID != cairn.BuiltinBackendID {
		t.Errorf("after a policy change and an update the instance is in %s, want the built-in backend it was created in", got.Backend.ID)
	}
	jsonEq(t, got.Latest.Value, `{"v":2}`)
	if other := e.create(hub.NewInstance{TypeRef: ref, Value: json.RawMessage(`{}`)}); e.get(other).Backend.ID != filesID {
		t.Errorf("a new instance is not in the policy's backend")
	}
}

// Applying the policy that is already stored is no change: no new resource
// version, the current document answered (an alias compares as its id).
func TestApplyPolicyUnchangedWritesNothing(t *testing.T) {
	e := newEnv(t)
	filesID, _ := e.addBackend("files", true, "")
	byAlias := policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", "files")}}}
	byID := policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", filesID)}}}
	first, err := e.h.ApplyPolicy(e.ctx, byAlias)
	if err != nil || first.ResourceVersion != 1 {
		t.Fatalf("first apply = %+v, %v; want version 1", first, err)
	}
	for _, p := range []policy.Policy{byAlias, byID} {
		again, err := e.h.ApplyPolicy(e.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != 1 || again.Seq != first.Seq {
			t.Fatalf("same policy applied again = version %d seq %d; want the stored version 1 seq %d", again.ResourceVersion, again.Seq, first.Seq)
		}
	}
	if rvs, err := e.h.ResourceVersions(e.ctx, hub.PolicyID, false); err != nil || len(rvs) != 1 {
		t.Fatalf("policy history = %d versions, %v; want 1", len(rvs), err)
	}
	// The first apply of an empty policy is a change (none was applied).
	e2 := newEnv(t)
	if doc, err := e2.h.ApplyPolicy(e2.ctx, policy.Policy{}); err != nil || doc.ResourceVersion != 1 {
		t.Fatalf("first apply of an empty policy = %+v, %v; want version 1", doc, err)
	}
	if doc, err := e.h.ApplyPolicy(e.ctx, policy.Policy{}); err != nil || doc.ResourceVersion != 2 {
		t.Fatalf("a different policy = %+v, %v; want version 2", doc, err)
	}
}
