package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// managedEntry is one metadata.managedFields entry, decoded loosely.
type managedEntry struct {
	Manager    string         `json:"manager"`
	Operation  string         `json:"operation"`
	APIVersion string         `json:"apiVersion"`
	FieldsV1   map[string]any `json:"fieldsV1"`
}

func managedFieldsOf(t *testing.T, k *kubectlRunner, name string) map[string]managedEntry {
	t.Helper()
	var mf []managedEntry
	if err := json.Unmarshal([]byte(k.ok("get", "flag", name, "-o", "jsonpath={.metadata.managedFields}")), &mf); err != nil {
		t.Fatalf("managedFields of %s: %v", name, err)
	}
	out := map[string]managedEntry{}
	for _, e := range mf {
		out[e.Manager+"/"+e.Operation] = e
	}
	return out
}

// TestKubectlServerSideApply drives kubectl apply --server-side: create,
// change, field ownership, conflicts between managers, --force-conflicts,
// and a field removed from the manager's configuration.
func TestKubectlServerSideApply(t *testing.T) {
	e, k := newKubectlEnv(t)
	cfg := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata:\n  name: ssa\n  labels: {team: a}\nspec:\n  key: ssa\n%s"
	k.file("ssa.yaml", fmt.Sprintf(cfg, "  enabled: true\n  port: 80\n"))
	if out := k.ok("apply", "--server-side", "-f", "ssa.yaml"); strings.TrimSpace(out) != "flag.flipt.io/ssa serverside-applied" {
		t.Errorf("first server-side apply = %q", out)
	}
	mf := managedFieldsOf(t, k, "ssa")
	kc, ok := mf["kubectl/Apply"]
	if !ok || kc.APIVersion != "flipt.io/v1alpha1" {
		t.Fatalf("managedFields = %+v, want an Apply entry of kubectl for flipt.io/v1alpha1", mf)
	}
	spec, _ := kc.FieldsV1["f:spec"].(map[string]any)
	for _, f := range []string{"f:key", "f:enabled", "f:port"} {
		if _, ok := spec[f]; !ok {
			t.Errorf("kubectl does not own spec %s: %v", f, kc.FieldsV1)
		}
	}

	// The same manager changes a field it owns.
	k.file("ssa.yaml", fmt.Sprintf(cfg, "  enabled: false\n  port: 80\n"))
	k.ok("apply", "--server-side", "-f", "ssa.yaml")
	if got := k.ok("get", "flag", "ssa", "-o", "jsonpath={.spec.enabled}"); got != "false" {
		t.Errorf("spec.enabled after the second apply = %s", got)
	}

	// Another manager may not change it without forcing.
	k.file("other.yaml", fmt.Sprintf(cfg, "  enabled: true\n"))
	k.fails([]string{"Apply failed with 1 conflict", `conflict with "kubectl"`, ".spec.enabled"},
		"apply", "--server-side", "--field-manager=other", "-f", "other.yaml")
	if got := k.ok("get", "flag", "ssa", "-o", "jsonpath={.spec.enabled}"); got != "false" {
		t.Errorf("spec.enabled after a refused apply = %s", got)
	}
	// Applying the value already there shares the field: no conflict.
	k.file("share.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: ssa}\nspec: {key: ssa, port: 80}\n")
	before := k.ok("get", "flag", "ssa", "-o", "jsonpath={.metadata.generation}")
	k.ok("apply", "--server-side", "--field-manager=sharer", "-f", "share.yaml")
	if _, ok := managedFieldsOf(t, k, "ssa")["sharer/Apply"]; !ok {
		t.Error("a manager applying values already there got no managedFields entry")
	}
	if after := k.ok("get", "flag", "ssa", "-o", "jsonpath={.metadata.generation}"); after != before {
		t.Errorf("an ownership-only apply moved generation %s to %s, want no new resource version", before, after)
	}
	// --force-conflicts takes the field over.
	k.ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "other.yaml")
	if got := k.ok("get", "flag", "ssa", "-o", "jsonpath={.spec.enabled}"); got != "true" {
		t.Errorf("spec.enabled after a forced apply = %s", got)
	}
	mf = managedFieldsOf(t, k, "ssa")
	if spec, _ := mf["kubectl/Apply"].FieldsV1["f:spec"].(map[string]any); spec["f:enabled"] != nil {
		t.Errorf("kubectl still owns spec.enabled after another manager forced it: %v", mf["kubectl/Apply"].FieldsV1)
	}

	// A field kubectl stops applying, and no one else owns, is removed;
	// one another manager still owns stays.
	k.file("ssa.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: ssa, labels: {team: a}}\nspec: {key: ssa}\n")
	k.ok("apply", "--server-side", "-f", "ssa.yaml")
	var got struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal([]byte(k.ok("get", "flag", "ssa", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec["port"] != float64(80) || got.Spec["enabled"] != true {
		t.Errorf("spec = %v: port is still owned by sharer and enabled by other, both must stay", got.Spec)
	}
	k.ok("apply", "--server-side", "--field-manager=sharer", "-f", "ssa.yaml")
	if out := k.ok("get", "flag", "ssa", "-o", "jsonpath={.spec.port}"); out != "" {
		t.Errorf("spec.port = %s after every manager dropped it, want it removed", out)
	}

	// An object made with kubectl create then applied server-side: the
	// creating manager's fields conflict, as on the API server.
	k.file("made.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: made}\nspec: {key: made, port: 1}\n")
	k.ok("create", "-f", "made.yaml")
	if _, ok := managedFieldsOf(t, k, "made")["kubectl-create/Update"]; !ok {
		t.Errorf("kubectl create recorded no Update entry for kubectl-create")
	}
	k.file("made2.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: made}\nspec: {key: made, port: 2}\n")
	k.fails([]string{`conflict with "kubectl-create"`}, "apply", "--server-side", "-f", "made2.yaml")

	// The field manager is required, as on the API server.
	r := e.do("PATCH", flagPath("default", "made"), "application/apply-patch+yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: made}\n")
	wantStatus(t, r, http.StatusUnprocessableEntity, "Invalid", "fieldManager: Required value")
}

// TestMergePatchRetriedOnConflict sends concurrent merge patches without a
// resourceVersion: the server retries each on conflict, as the API server
// does, so every one succeeds and none is lost.
func TestMergePatchRetriedOnConflict(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "busy", nil, `{"key":"busy"}`)
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("PATCH", flagPath("default", "busy"), "application/merge-patch+json",
				fmt.Sprintf(`{"metadata":{"labels":{"l%d":"x"}}}`, i))
			codes[i] = r.code
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("patch %d answered %d, want 200", i, c)
		}
	}
	if got := decodeObj(t, e.get(flagPath("default", "busy"))).Metadata.Labels; len(got) != n {
		t.Errorf("labels = %v, want all %d patches' labels", got, n)
	}
}

// TestApplyResourceVersionPrecondition: a resourceVersion in an apply
// configuration must be current (409 otherwise, never retried).
func TestApplyResourceVersionPrecondition(t *testing.T) {
	e := newFlagsEnv(t)
	cur := e.createFlag("default", "p", nil, `{"key":"p"}`)
	cfg := func(rv string) string {
		return "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: p, resourceVersion: \"" + rv + "\"}\nspec: {key: p, port: 5}\n"
	}
	wantStatus(t, e.do("PATCH", flagPath("default", "p")+"?fieldManager=t", "application/apply-patch+yaml", cfg("1")), http.StatusConflict, "Conflict")
	r := e.mustDo("PATCH", flagPath("default", "p")+"?fieldManager=t", "application/apply-patch+yaml", cfg(cur.Metadata.ResourceVersion), http.StatusOK)
	if got := decodeObj(t, r); got.Spec["port"] != float64(5) {
		t.Errorf("apply with the current resourceVersion = %s", r)
	}
}

// complexRD has what JSON Schemas have and structural schemas restrict:
// $ref to $defs, oneOf, arrays of objects, maps, a type list.
const complexRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "stacks.example.com"},
 "names": {"kind": "Stack", "plural": "stacks"},
 "spec": {"group": "example.com", "versions": {"v1": {
   "$defs": {"port": {"type": "object", "properties": {"name": {"type": "string"}, "number": {"type": "integer"}}}},
   "type": "object",
   "properties": {
     "ports": {"type": "array", "items": {"$ref": "#/$defs/port"}},
     "env": {"type": "object", "additionalProperties": {"type": "string"}},
     "size": {"type": ["string", "integer"]},
     "mode": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"name": {"type": "string"}}}]},
     "owner": {"type": "object", "properties": {"team": {"type": "string"}, "email": {"type": "string"}}}}}}}}`

// TestApplyComplexSchema: server-side apply works on a Type whose JSON
// Schema goes beyond a structural schema; objects still merge field by
// field between managers.
func TestApplyComplexSchema(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", complexRD, http.StatusCreated)
	path := "/apis/example.com/v1/namespaces/default/stacks/s"
	apply := func(manager, body string, want int) response {
		t.Helper()
		return e.mustDo("PATCH", path+"?fieldManager="+manager, "application/apply-patch+yaml",
			"apiVersion: example.com/v1\nkind: Stack\nmetadata: {name: s}\nspec:\n"+body, want)
	}
	apply("a", "  ports: [{name: http, number: 80}]\n  env: {A: \"1\"}\n  size: 3\n  mode: fast\n  owner: {team: x}\n", http.StatusCreated)
	apply("b", "  env: {B: \"2\"}\n  owner: {email: b@example.com}\n", http.StatusOK)
	got := decodeObj(t, e.get(path))
	env, _ := got.Spec["env"].(map[string]any)
	owner, _ := got.Spec["owner"].(map[string]any)
	if env["A"] != "1" || env["B"] != "2" || owner["team"] != "x" || owner["email"] != "b@example.com" || got.Spec["size"] != float64(3) {
		t.Errorf("spec after two managers' applies = %v, want both managers' fields", got.Spec)
	}
	st := wantStatus(t, apply("b", "  owner: {team: other}\n", http.StatusConflict), http.StatusConflict, "Conflict", `conflict with "a"`)
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".spec.owner.team" {
		t.Errorf("conflict details = %+v, want one cause for .spec.owner.team", st.Details)
	}
}
