package rest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
)

func TestSubresources(t *testing.T) {
	e := newFlagsEnv(t)
	f := e.createFlag("default", "one", nil, `{"key": "one", "enabled": true}`)
	e.mustDo("PATCH", flagPath("default", "one"), "application/merge-patch+json", `{"spec":{"enabled":false}}`, http.StatusOK)

	// History: every resource version, oldest first, with values unless asked not to.
	var rvs rest.ResourceVersionList
	decode := func(r response, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(r.body), v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
	decode(e.mustDo("GET", hubGV+"/typeinstances/"+f.Metadata.UID+"/resourceversions", "", nil, http.StatusOK), &rvs)
	if rvs.Kind != "ResourceVersionList" || len(rvs.Items) != 2 || rvs.Items[0].ResourceVersion != 1 || rvs.Items[1].ResourceVersion != 2 ||
		!cairn.JSONEqual(rvs.Items[0].Value, json.RawMessage(`{"key":"one","enabled":true}`)) || !cairn.JSONEqual(rvs.Items[1].Value, json.RawMessage(`{"key":"one","enabled":false}`)) {
		t.Errorf("history = %+v", rvs)
	}
	var bare rest.ResourceVersionList
	decode(e.mustDo("GET", hubGV+"/typeinstances/"+f.Metadata.UID+"/resourceversions?values=false", "", nil, http.StatusOK), &bare)
	if len(bare.Items) != 2 || bare.Items[0].Value != nil {
		t.Errorf("history without values = %+v", bare)
	}
	wantStatus(t, e.get(hubGV+"/typeinstances/00000000-0000-0000-0000-000000000000/resourceversions"), http.StatusNotFound, "NotFound")

	// Backend check: the built-in backend serves; a missing one is NotFound.
	var c rest.BackendCheck
	decode(e.mustDo("GET", hubGV+"/backends/"+cairn.BuiltinBackendID+"/check", "", nil, http.StatusOK), &c)
	if c.ID != cairn.BuiltinBackendID || c.Health.Status != "SERVING" || !c.Backend.Abstract {
		t.Errorf("check = %+v", c)
	}
	wantStatus(t, e.get(hubGV+"/backends/nosuch/check"), http.StatusNotFound, "NotFound")

	// Policy explain: without a policy the built-in backend; a bad path is refused.
	var ex hub.PolicyExplanation
	decode(e.mustDo("GET", hubGV+"/policies/default/explain?path=cap.type.aws.auth.credentials", "", nil, http.StatusOK), &ex)
	if ex.Matched || ex.BackendID != cairn.BuiltinBackendID || ex.PolicyVersion != 0 {
		t.Errorf("explain = %+v", ex)
	}
	wantStatus(t, e.get(hubGV+"/policies/default/explain"), http.StatusBadRequest, "BadRequest", "path")
	wantStatus(t, e.get(hubGV+"/policies/other/explain?path=a.b"), http.StatusNotFound, "NotFound")

	// Only GET, and only these subresources.
	wantStatus(t, e.do("POST", hubGV+"/backends/"+cairn.BuiltinBackendID+"/check", "application/json", `{}`), http.StatusMethodNotAllowed, "MethodNotAllowed")
	wantStatus(t, e.get(hubGV+"/types/x:1/status"), http.StatusNotFound, "NotFound")
}
