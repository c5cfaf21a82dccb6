package rest_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestRequestTimeout: ?timeout= bounds a request as on the Kubernetes API
// server: a deadline that passes before a create is made answers the
// server's 504 Status word for word and creates nothing; a value that is
// not a duration is refused with its 400; 0 means no deadline.
func TestRequestTimeout(t *testing.T) {
	e := newFlagsEnv(t)
	flag := func(name string) string {
		return `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"` + name + `"},"spec":{"key":"k"}}`
	}
	for _, tc := range []struct {
		name, timeout string
		code          int
		reason, msg   string
	}{
		{"passed", "1ns", http.StatusGatewayTimeout, "Timeout",
			"Timeout: request did not complete within requested timeout - context deadline exceeded"},
		{"bad", "soon", http.StatusBadRequest, "BadRequest",
			`invalid timeout specified in the request URL - time: invalid duration "soon"`},
		{"none", "0s", http.StatusCreated, "", ""},
		{"ample", "1m", http.StatusCreated, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.with(t).do("POST", flagsIn("default")+"?timeout="+tc.timeout, "application/json", flag(tc.name))
			if r.code != tc.code {
				t.Fatalf("POST ?timeout=%s: %s, want %d", tc.timeout, r, tc.code)
			}
			if tc.code == http.StatusCreated {
				e.with(t).mustDo("GET", flagPath("default", tc.name), "", nil, http.StatusOK)
				return
			}
			var st struct {
				Kind, Status, Reason, Message string
				Code                          int
			}
			if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" || st.Status != "Failure" ||
				st.Reason != tc.reason || st.Message != tc.msg || st.Code != tc.code {
				t.Errorf("POST ?timeout=%s answered %s (%v), want Status %d %s %q", tc.timeout, r.body, err, tc.code, tc.reason, tc.msg)
			}
			e.with(t).mustDo("GET", flagPath("default", tc.name), "", nil, http.StatusNotFound)
		})
	}
}
