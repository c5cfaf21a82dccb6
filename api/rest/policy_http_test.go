package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
)

func TestPolicyResource(t *testing.T) {
	e := newRestEnv(t)
	type policyObj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
			Generation      int    `json:"generation"`
		} `json:"metadata"`
		Spec struct {
			TypeInstance struct {
				Rules []struct {
					TypeRef struct{ Path string } `json:"typeRef"`
					Backend struct{ ID string }   `json:"backend"`
				} `json:"rules"`
			} `json:"typeInstance"`
		} `json:"spec"`
	}
	var p policyObj
	decodePolicyJSON(e.mustDo("GET", hubGV+"/policies/default", "", nil, http.StatusOK).body, &p)
	if p.Kind != "Policy" || p.Metadata.Name != "default" || p.Metadata.Generation != 0 {
		t.Fatalf("policy before any apply = %+v", p)
	}
	put := `{"apiVersion":"hub.cairn.dev/v1","kind":"Policy","metadata":{"name":"default"},
	  "spec":{"typeInstance":{"rules":[{"typeRef":{"path":"cap.type.tpl.*"},"backend":{"id":"gotemplate"}},{"typeRef":{"path":"cap.*"},"backend":{"id":"cairn-builtin"}}]}}}`
	decodePolicyJSON(e.mustDo("PUT", hubGV+"/policies/default", "application/json", put, http.StatusOK).body, &p)
	if p.Metadata.Generation != 1 || len(p.Spec.TypeInstance.Rules) != 2 || p.Spec.TypeInstance.Rules[0].Backend.ID != gotemplate.BackendID ||
		p.Spec.TypeInstance.Rules[1].Backend.ID != cairn.BuiltinBackendID {
		t.Fatalf("policy after PUT = %+v", p)
	}
	// A stale resourceVersion conflicts; a bad rule is Invalid with a cause per rule.
	stale := strings.Replace(put, `"name":"default"`, `"name":"default","resourceVersion":"1"`, 1)
	wantStatus(t, e.do("PUT", hubGV+"/policies/default", "application/json", stale), http.StatusConflict, "Conflict", "changed since it was read")
	bad := `{"spec":{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"gotemplate"}}]}}}`
	st := wantStatus(t, e.do("PUT", hubGV+"/policies/default", "application/json", bad), http.StatusUnprocessableEntity, "Invalid", "requires a context")
	if st.Details == nil || len(st.Details.Causes) != 1 {
		t.Errorf("causes = %+v, want one", st.Details)
	}
	wantStatus(t, e.do("GET", hubGV+"/policies/other", "", nil), http.StatusNotFound, "NotFound")
	wantStatus(t, e.do("PUT", hubGV+"/policies/default", "application/json", `{"spec":{"typeInstance":{"rulez":[]}}}`), http.StatusUnprocessableEntity, "Invalid")

	// Discovery lists it.
	var rl struct {
		Resources []struct{ Name string } `json:"resources"`
	}
	decodePolicyJSON(e.mustDo("GET", hubGV, "", nil, http.StatusOK).body, &rl)
	found := false
	for _, r := range rl.Resources {
		found = found || r.Name == "policies"
	}
	if !found {
		t.Errorf("discovery of %s lacks policies: %+v", hubGV, rl)
	}
}

func decodePolicyJSON(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

// TestPolicyFieldValidation: a PUT of the policy reports fields outside
// apiVersion, kind, metadata and spec as every other write does (the spec
// is the policy's own to judge): refused under fieldValidation=Strict,
// kubectl's default, and warned about under Warn; and nothing changes when
// it is refused. The policy's PUT used to ignore the parameter.
func TestPolicyFieldValidation(t *testing.T) {
	e := newRestEnv(t)
	body := `{"apiVersion":"hub.cairn.dev/v1","kind":"Policy","metadata":{"name":"default","colour":"red"},"statuz":{},
	  "spec":{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"cairn-builtin"}}]}}}`
	wantStatus(t, e.do("PUT", hubGV+"/policies/default?fieldValidation=Strict", "application/json", body), http.StatusBadRequest, "BadRequest",
		`strict decoding error: unknown field "metadata.colour", unknown field "statuz"`)
	var p struct {
		Metadata struct {
			Generation int `json:"generation"`
		} `json:"metadata"`
	}
	decodePolicyJSON(e.mustDo("GET", hubGV+"/policies/default", "", nil, http.StatusOK).body, &p)
	if p.Metadata.Generation != 0 {
		t.Fatalf("a refused PUT changed the policy: generation %d", p.Metadata.Generation)
	}
	r := e.mustDo("PUT", hubGV+"/policies/default", "application/json", body, http.StatusOK)
	if got := r.header.Values("Warning"); len(got) != 2 || !strings.Contains(got[0], `unknown field \"metadata.colour\"`) {
		t.Errorf("Warning headers = %q, want one per unknown field", got)
	}
	wantStatus(t, e.do("PUT", hubGV+"/policies/default?fieldValidation=Loose", "application/json", body), http.StatusBadRequest, "BadRequest", "fieldValidation")
}
