package rest_test

import (
	"net/http"
	"testing"
)

// TestDryRunAnswerResourceVersion: a dry run answers with the object as
// the write would make it but with the resourceVersion as the API server
// gives it: none for a create (nothing was stored), the live one for an
// update, so the answer can be sent back as a replace and kubectl diff
// shows no resourceVersion change.
func TestDryRunAnswerResourceVersion(t *testing.T) {
	e := newFlagsEnv(t)
	live := e.createFlag("default", "a", nil, `{"key":"a","port":1}`)
	applyNew := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: fresh}\nspec: {key: fresh}\n"
	applyLive := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: a}\nspec: {key: a, port: 3}\n"
	for _, tt := range []struct {
		name, method, path, ct string
		body                   any
		code                   int
		rv                     string
		gen                    int64
	}{
		{"create", "POST", flagsIn("default"), "application/json", flag("b", nil, `{"key":"b"}`), 201, "", 1},
		{"replace", "PUT", flagPath("default", "a"), "application/json", flag("a", nil, `{"key":"a","port":2}`), 200, live.Metadata.ResourceVersion, 2},
		{"merge patch", "PATCH", flagPath("default", "a"), "application/merge-patch+json", `{"spec":{"port":2}}`, 200, live.Metadata.ResourceVersion, 2},
		{"apply of a new object", "PATCH", flagPath("default", "fresh") + "?fieldManager=m", "application/apply-patch+yaml", applyNew, 201, "", 1},
		{"apply to the live object", "PATCH", flagPath("default", "a") + "?fieldManager=m&force=true", "application/apply-patch+yaml", applyLive, 200, live.Metadata.ResourceVersion, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			got := decodeObj(t, e.mustDo(tt.method, tt.path+sep(tt.path)+"dryRun=All", tt.ct, tt.body, tt.code))
			if got.Metadata.ResourceVersion != tt.rv || got.Metadata.Generation != tt.gen {
				t.Errorf("dry-run answer: resourceVersion %q generation %d, want %q and %d", got.Metadata.ResourceVersion, got.Metadata.Generation, tt.rv, tt.gen)
			}
		})
	}
	// The answer of a dry-run replace is a valid replace of the live object.
	answer := e.mustDo("PUT", flagPath("default", "a")+"?dryRun=All", "application/json", flag("a", nil, `{"key":"a","port":5}`), http.StatusOK)
	if got := decodeObj(t, e.mustDo("PUT", flagPath("default", "a"), "application/json", answer.body, http.StatusOK)); got.Spec["port"] != float64(5) {
		t.Errorf("replace with the dry-run answer = %s", got.Raw)
	}
}

func sep(path string) string {
	for _, c := range path {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}

// TestDryRunTypeInstanceResourceVersion: the same for TypeInstances.
func TestDryRunTypeInstanceResourceVersion(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	created := decodeTI(t, e.mustDo("POST", hubGV+"/typeinstances?dryRun=All", "application/yaml", pgDoc("db", ""), http.StatusCreated))
	if created.Metadata.ResourceVersion != "" {
		t.Errorf("dry-run create answered resourceVersion %q, want none", created.Metadata.ResourceVersion)
	}
	live := decodeTI(t, e.mustDo("POST", hubGV+"/typeinstances", "application/yaml", pgDoc("db", ""), http.StatusCreated))
	live.Metadata.Labels = map[string]string{"env": "prod"}
	got := decodeTI(t, e.mustDo("PUT", hubGV+"/typeinstances/"+live.Metadata.UID+"?dryRun=All", "application/json", live, http.StatusOK))
	if got.Metadata.ResourceVersion != live.Metadata.ResourceVersion || got.Metadata.Labels["env"] != "prod" {
		t.Errorf("dry-run replace answered resourceVersion %q labels %v, want %q and env=prod", got.Metadata.ResourceVersion, got.Metadata.Labels, live.Metadata.ResourceVersion)
	}
}
