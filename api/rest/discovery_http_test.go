package rest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

type apiResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames"`
}

type groupVersion struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Kind             string         `json:"kind"`
	Name             string         `json:"name"`
	Versions         []groupVersion `json:"versions"`
	PreferredVersion groupVersion   `json:"preferredVersion"`
}

func TestDiscovery(t *testing.T) {
	e := newFlagsEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	userVerbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

	t.Run("version", func(t *testing.T) {
		e := e.with(t)
		var v map[string]string
		r := e.mustDo("GET", "/version", "", nil, http.StatusOK)
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		if v["major"] != "1" || v["minor"] != "32" || v["gitVersion"] != "v1.32.0-cairn-test" || v["platform"] != "test/test" {
			t.Errorf("/version = %s", r.body)
		}
	})
	t.Run("api serves namespaces only", func(t *testing.T) {
		e := e.with(t)
		var v struct {
			Kind     string   `json:"kind"`
			Versions []string `json:"versions"`
		}
		r := e.mustDo("GET", "/api", "", nil, http.StatusOK)
		if err := json.Unmarshal(r.body, &v); err != nil || v.Kind != "APIVersions" || len(v.Versions) != 1 || v.Versions[0] != "v1" {
			t.Errorf("/api = %s (%v)", r.body, err)
		}
		var l struct {
			Resources []struct{ Name, Kind string } `json:"resources"`
		}
		r = e.mustDo("GET", "/api/v1", "", nil, http.StatusOK)
		if err := json.Unmarshal(r.body, &l); err != nil || len(l.Resources) != 1 || l.Resources[0].Name != "namespaces" {
			t.Errorf("/api/v1 = %s (%v)", r.body, err)
		}
	})
	t.Run("apis", func(t *testing.T) {
		e := e.with(t)
		var v struct {
			Kind       string     `json:"kind"`
			APIVersion string     `json:"apiVersion"`
			Groups     []apiGroup `json:"groups"`
		}
		r := e.mustDo("GET", "/apis", "", nil, http.StatusOK)
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		if v.Kind != "APIGroupList" || v.APIVersion != "v1" {
			t.Errorf("/apis kind %q apiVersion %q", v.Kind, v.APIVersion)
		}
		want := map[string][]string{
			"database.cairn.dev": {"v1"},
			"flipt.io":           {"v1", "v1alpha1"}, // newest first: v1 is preferred
			"hub.cairn.dev":      {"v1"},
			// RBAC objects (rbac.go)
			"rbac.authorization.k8s.io": {"v1"},
		}
		if len(v.Groups) != len(want) {
			t.Fatalf("groups = %+v, want %v", v.Groups, want)
		}
		for _, g := range v.Groups {
			var got []string
			for _, gv := range g.Versions {
				got = append(got, gv.Version)
				if gv.GroupVersion != g.Name+"/"+gv.Version {
					t.Errorf("group %s: groupVersion %q for version %q", g.Name, gv.GroupVersion, gv.Version)
				}
			}
			if !slices.Equal(got, want[g.Name]) {
				t.Errorf("group %s versions = %v, want %v", g.Name, got, want[g.Name])
			}
			if g.PreferredVersion.Version != want[g.Name][0] {
				t.Errorf("group %s preferred %v, want %s", g.Name, g.PreferredVersion, want[g.Name][0])
			}
		}
	})
	t.Run("group", func(t *testing.T) {
		e := e.with(t)
		var g apiGroup
		r := e.mustDo("GET", "/apis/flipt.io", "", nil, http.StatusOK)
		if err := json.Unmarshal(r.body, &g); err != nil {
			t.Fatal(err)
		}
		if g.Kind != "APIGroup" || g.Name != "flipt.io" || len(g.Versions) != 2 || g.PreferredVersion.GroupVersion != "flipt.io/v1" {
			t.Errorf("/apis/flipt.io = %s", r.body)
		}
	})

	resources := []struct {
		gv   string
		want []apiResource
		more bool // the group may serve other resources too
	}{
		{"flipt.io/v1alpha1", []apiResource{{Name: "flags", SingularName: "flag", Namespaced: true, Kind: "Flag", Verbs: userVerbs, ShortNames: []string{"fl"}}, {Name: "flags/status", Namespaced: true, Kind: "Flag", Verbs: []string{"get", "patch", "update"}}}, false},
		{"flipt.io/v1", []apiResource{{Name: "flags", SingularName: "flag", Namespaced: true, Kind: "Flag", Verbs: userVerbs, ShortNames: []string{"fl"}}, {Name: "flags/status", Namespaced: true, Kind: "Flag", Verbs: []string{"get", "patch", "update"}}}, false},
		{"database.cairn.dev/v1", []apiResource{{Name: "postgresconfigs", SingularName: "postgresconfig", Namespaced: true, Kind: "PostgresConfig", Verbs: userVerbs, ShortNames: []string{"pgc"}}, {Name: "postgresconfigs/status", Namespaced: true, Kind: "PostgresConfig", Verbs: []string{"get", "patch", "update"}}}, false},
		{"hub.cairn.dev/v1", []apiResource{
			{Name: "types", SingularName: "type", Kind: "Type", Verbs: []string{"create", "delete", "get", "list"}},
			{Name: "typeinstances", SingularName: "typeinstance", Kind: "TypeInstance", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}, ShortNames: []string{"ti"}},
			{Name: "backends", SingularName: "backend", Kind: "Backend", Verbs: []string{"get", "list"}},
		}, true},
	}
	for _, tt := range resources {
		t.Run("resources "+tt.gv, func(t *testing.T) {
			e := e.with(t)
			var l struct {
				Kind         string        `json:"kind"`
				GroupVersion string        `json:"groupVersion"`
				Resources    []apiResource `json:"resources"`
			}
			r := e.mustDo("GET", "/apis/"+tt.gv, "", nil, http.StatusOK)
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			if l.Kind != "APIResourceList" || l.GroupVersion != tt.gv {
				t.Errorf("kind %q groupVersion %q", l.Kind, l.GroupVersion)
			}
			if len(l.Resources) < len(tt.want) || !tt.more && len(l.Resources) != len(tt.want) {
				t.Fatalf("resources = %+v, want %+v", l.Resources, tt.want)
			}
			for _, w := range tt.want {
				i := slices.IndexFunc(l.Resources, func(a apiResource) bool { return a.Name == w.Name })
				if i < 0 {
					t.Errorf("resource %s missing from %s", w.Name, r.body)
					continue
				}
				got := l.Resources[i]
				slices.Sort(got.Verbs)
				if got.SingularName != w.SingularName || got.Namespaced != w.Namespaced || got.Kind != w.Kind ||
					!slices.Equal(got.Verbs, w.Verbs) || !slices.Equal(got.ShortNames, w.ShortNames) {
					t.Errorf("resource %s = %+v, want %+v", w.Name, got, w)
				}
			}
		})
	}

	errs := []struct {
		name, method, path string
		code               int
		reason             string
	}{
		{"unknown group", "GET", "/apis/nope.example.com", 404, "NotFound"},
		{"unknown version", "GET", "/apis/flipt.io/v9", 404, "NotFound"},
		{"unknown resource", "GET", "/apis/flipt.io/v1alpha1/namespaces/default/widgets", 404, "NotFound"},
		{"unknown top-level path", "GET", "/nothing/here", 404, "NotFound"},
		{"too deep a path", "GET", "/apis/flipt.io/v1alpha1/namespaces/default/flags/a/b/c", 404, "NotFound"},
		{"write to /version", "POST", "/version", 405, "MethodNotAllowed"},
		{"write to /apis", "DELETE", "/apis", 405, "MethodNotAllowed"},
		{"write to a group", "PUT", "/apis/flipt.io/v1alpha1", 405, "MethodNotAllowed"},
		{"write to /openapi/v3", "POST", "/openapi/v3", 405, "MethodNotAllowed"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			wantStatus(t, e.do(tt.method, tt.path, "application/json", "{}"), tt.code, tt.reason)
		})
	}

	t.Run("a deleted Type leaves discovery", func(t *testing.T) {
		e := e.with(t)
		e.mustDo("DELETE", hubGV+"/types/cap.type.database.postgresql.config:0.1.0", "", nil, http.StatusOK)
		wantStatus(t, e.get("/apis/database.cairn.dev/v1"), 404, "NotFound")
		if r := e.get("/apis"); strings.Contains(string(r.body), "database.cairn.dev") {
			t.Errorf("/apis still lists database.cairn.dev: %s", r.body)
		}
	})

	t.Run("metrics see route templates", func(t *testing.T) {
		e := e.with(t)
		for _, want := range []string{"GET /version 200", "GET /apis/{group}/{version} 200", "GET /apis/{group}/{version} 404", "POST /version 405"} {
			if !e.metrics.seen(want) {
				t.Errorf("no metrics observation %q", want)
			}
		}
	})
}
