package rest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestOpenAPIV3(t *testing.T) {
	e := newFlagsEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)

	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	r := e.mustDo("GET", "/openapi/v3", "", nil, http.StatusOK)
	if err := json.Unmarshal(r.body, &index); err != nil {
		t.Fatal(err)
	}
	for _, gv := range []string{"apis/flipt.io/v1alpha1", "apis/flipt.io/v1", "apis/database.cairn.dev/v1", "apis/hub.cairn.dev/v1", "apis/rbac.authorization.k8s.io/v1"} {
		p, ok := index.Paths[gv]
		if !ok || !strings.HasPrefix(p.ServerRelativeURL, "/openapi/v3/"+gv+"?hash=") {
			t.Errorf("index entry %s = %+v", gv, p)
		}
	}
	if len(index.Paths) != 5 {
		t.Errorf("index lists %d documents, want 5: %s", len(index.Paths), r.body)
	}

	// The document as kubectl fetches it: by the index's URL.
	doc := openAPIDoc(t, e, index.Paths["apis/flipt.io/v1alpha1"].ServerRelativeURL)
	if doc.OpenAPI != "3.0.0" {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	flag, ok := doc.Components.Schemas["io.flipt.v1alpha1.Flag"]
	if !ok {
		t.Fatalf("no schema io.flipt.v1alpha1.Flag among %v", keys(doc.Components.Schemas))
	}
	if gvk := flag.GVK; len(gvk) != 1 || gvk[0]["group"] != "flipt.io" || gvk[0]["version"] != "v1alpha1" || gvk[0]["kind"] != "Flag" {
		t.Errorf("x-kubernetes-group-version-kind = %v", gvk)
	}
	if m := flag.Properties["metadata"]; m.Ref != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Errorf("metadata $ref = %q", m.Ref)
	}
	if _, ok := doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]; !ok {
		t.Error("ObjectMeta schema missing")
	}
	if l := doc.Components.Schemas["io.flipt.v1alpha1.FlagList"]; len(l.GVK) != 1 || l.GVK[0]["kind"] != "FlagList" {
		t.Errorf("FlagList GVK = %v", l.GVK)
	}
	spec := flag.Properties["spec"]
	props := []struct{ name, typ, desc string }{
		{"key", "string", "The flag's key."},
		{"enabled", "boolean", ""},
		{"port", "integer", "A port the flag is served on."},
		{"tags", "array", ""},
	}
	for _, p := range props {
		got, ok := spec.Properties[p.name]
		if !ok || got.Type != p.typ || got.Description != p.desc {
			t.Errorf("spec.%s = %+v, want type %s description %q", p.name, got, p.typ, p.desc)
		}
	}
	if !slices.Equal(spec.Required, []string{"key"}) || spec.Type != "object" {
		t.Errorf("spec required %v type %q", spec.Required, spec.Type)
	}
	if port := spec.Properties["port"]; port.Minimum == nil || *port.Minimum != 1 || port.Maximum == nil || *port.Maximum != 65535 {
		t.Errorf("spec.port bounds = %v..%v", port.Minimum, port.Maximum)
	}
	if tags := spec.Properties["tags"]; tags.Items == nil || tags.Items.Type != "string" {
		t.Errorf("spec.tags items = %+v", tags.Items)
	}

	item := doc.Paths["/apis/flipt.io/v1alpha1/namespaces/{namespace}/flags/{name}"]
	for _, op := range []string{"get", "put", "patch", "delete"} {
		if _, ok := item[op]; !ok {
			t.Errorf("item path has no %s operation", op)
		}
	}
	patch := item["patch"]
	if !slices.ContainsFunc(patch.Parameters, func(p param) bool { return p.Name == "fieldValidation" && p.In == "query" }) {
		t.Errorf("PATCH parameters = %+v, want fieldValidation", patch.Parameters)
	}
	for _, ct := range []string{"application/merge-patch+json", "application/json-patch+json"} {
		if _, ok := patch.RequestBody.Content[ct]; !ok {
			t.Errorf("PATCH does not accept %s", ct)
		}
	}
	if _, ok := patch.RequestBody.Content["application/strategic-merge-patch+json"]; ok {
		t.Error("PATCH claims strategic merge patch, which the server refuses")
	}
	if g := patch.GVK; g["kind"] != "Flag" || g["group"] != "flipt.io" {
		t.Errorf("PATCH x-kubernetes-group-version-kind = %v", g)
	}
	coll := doc.Paths["/apis/flipt.io/v1alpha1/namespaces/{namespace}/flags"]
	if _, ok := coll["post"]; !ok {
		t.Error("collection path has no post")
	}
	if !slices.ContainsFunc(coll["get"].Parameters, func(p param) bool { return p.Name == "labelSelector" }) {
		t.Error("list has no labelSelector parameter")
	}

	t.Run("cairn Type document", func(t *testing.T) {
		doc := openAPIDoc(t, e, "/openapi/v3/apis/database.cairn.dev/v1")
		spec := doc.Components.Schemas["dev.cairn.database.v1.PostgresConfig"].Properties["spec"]
		if spec.Properties["host"].Type != "string" || spec.Properties["port"].Type != "integer" || !slices.Equal(spec.Required, []string{"host", "port"}) {
			t.Errorf("spec = %+v", spec)
		}
	})
	t.Run("hub resources have no write operations they do not serve", func(t *testing.T) {
		doc := openAPIDoc(t, e, "/openapi/v3/apis/hub.cairn.dev/v1")
		if _, ok := doc.Components.Schemas["dev.cairn.hub.v1.TypeInstance"]; !ok {
			t.Errorf("schemas %v", keys(doc.Components.Schemas))
		}
		if _, ok := doc.Paths["/apis/hub.cairn.dev/v1/backends/{name}"]["put"]; ok {
			t.Error("backends document a PUT")
		}
	})
	t.Run("unknown group-version", func(t *testing.T) {
		wantStatus(t, e.get("/openapi/v3/apis/nope.io/v1"), 404, "NotFound")
		wantStatus(t, e.get("/openapi/v3/apis/flipt.io"), 404, "NotFound")
	})
}

type oaSchema struct {
	Type        string              `json:"type"`
	Ref         string              `json:"$ref"`
	Description string              `json:"description"`
	Required    []string            `json:"required"`
	Properties  map[string]oaSchema `json:"properties"`
	Items       *oaSchema           `json:"items"`
	Minimum     *float64            `json:"minimum"`
	Maximum     *float64            `json:"maximum"`
	GVK         []map[string]string `json:"x-kubernetes-group-version-kind"`
}

type param struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

type operation struct {
	Parameters  []param           `json:"parameters"`
	GVK         map[string]string `json:"x-kubernetes-group-version-kind"`
	RequestBody struct {
		Content map[string]any `json:"content"`
	} `json:"requestBody"`
}

type openAPI struct {
	OpenAPI    string                          `json:"openapi"`
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas map[string]oaSchema `json:"schemas"`
	} `json:"components"`
}

func openAPIDoc(t *testing.T, e *restEnv, path string) openAPI {
	t.Helper()
	var doc openAPI
	r := e.with(t).mustDo("GET", path, "", nil, http.StatusOK)
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return doc
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIHubKindsSpec: kubectl explain of the hub's own kinds says
// what their spec holds, not what an instance's spec is.
func TestOpenAPIHubKindsSpec(t *testing.T) {
	e := newRestEnv(t)
	doc := openAPIDoc(t, e, "/openapi/v3/apis/hub.cairn.dev/v1")
	for kind, want := range map[string]string{"Type": "revision", "TypeInstance": "typeRef", "Backend": "url"} {
		s, ok := doc.Components.Schemas["dev.cairn.hub.v1."+kind]
		if !ok {
			t.Fatalf("no schema of %s among %v", kind, keys(doc.Components.Schemas))
		}
		if d := s.Properties["spec"].Description; !strings.Contains(d, want) {
			t.Errorf("%s spec description %q does not mention %s", kind, d, want)
		}
	}
}

// TestOpenAPITypeInstanceFields: kubectl explain ti (--recursive,
// ti.spec.typeRef) shows the fields a TypeInstance is served with, not
// an open spec and a kind's status.
func TestOpenAPITypeInstanceFields(t *testing.T) {
	e := newRestEnv(t)
	doc := openAPIDoc(t, e, "/openapi/v3/apis/hub.cairn.dev/v1")
	ti := doc.Components.Schemas["dev.cairn.hub.v1.TypeInstance"]
	spec, status := ti.Properties["spec"], ti.Properties["status"]
	for _, p := range []string{"typeRef", "namespace", "name", "alias", "attributes", "value", "backend"} {
		if _, ok := spec.Properties[p]; !ok {
			t.Errorf("TypeInstance spec lacks %s: %v", p, keys(spec.Properties))
		}
	}
	if spec.Properties["typeRef"].Properties["path"].Type != "string" || spec.Properties["backend"].Properties["id"].Type != "string" {
		t.Errorf("TypeInstance spec.typeRef.path, spec.backend.id: %+v", spec.Properties)
	}
	if got, want := keys(status.Properties), []string{"createdBy", "lockedBy", "resourceVersion", "usedBy", "uses"}; !slices.Equal(got, want) {
		t.Errorf("TypeInstance status fields = %v, want %v", got, want)
	}
}

// TestOpenAPIHubKindsOwnFields: kubectl explain of each hub kind shows the
// fields that kind is served with. Types, Backends and the others were
// described with a served instance's status (typeRef, backend, lockedBy,
// uses, ...), which none of them has, and an open spec.
func TestOpenAPIHubKindsOwnFields(t *testing.T) {
	e := newRestEnv(t)
	doc := openAPIDoc(t, e, "/openapi/v3/apis/hub.cairn.dev/v1")
	for _, tt := range []struct {
		kind   string
		spec   []string // the spec's fields
		status []string // nil: the kind has no status
	}{
		{"Type", []string{"additionalRefs", "jsonSchema", "path", "rest", "revision"}, nil},
		{"Backend", []string{"abstract", "acceptValue", "alias", "contextSchema", "typeRef", "url"}, nil},
		{"LockRequest", []string{"action", "ids", "owner"}, []string{"succeeded"}},
		{"Policy", []string{"interface", "typeInstance"}, nil},
		{"Stack", []string{"archive", "description", "digest", "installationType", "manifest", "name", "version"}, nil},
		{"Proposal", []string{"backend", "base", "branch", "instances", "number", "provider", "url"}, []string{"message", "state"}},
	} {
		s, ok := doc.Components.Schemas["dev.cairn.hub.v1."+tt.kind]
		if !ok {
			t.Errorf("no schema of %s among %v", tt.kind, keys(doc.Components.Schemas))
			continue
		}
		if got := keys(s.Properties["spec"].Properties); !slices.Equal(got, tt.spec) {
			t.Errorf("%s spec fields = %v, want %v", tt.kind, got, tt.spec)
		}
		status, has := s.Properties["status"]
		switch {
		case tt.status == nil && has:
			t.Errorf("%s has a status in its schema (%v); it is served without one", tt.kind, keys(status.Properties))
		case tt.status != nil && !slices.Equal(keys(status.Properties), tt.status):
			t.Errorf("%s status fields = %v, want %v", tt.kind, keys(status.Properties), tt.status)
		}
	}
	typ := doc.Components.Schemas["dev.cairn.hub.v1.Type"].Properties["spec"]
	if got := typ.Properties["path"].Type; got != "string" {
		t.Errorf("Type spec.path type = %q, want string", got)
	}
	if got := typ.Properties["rest"].Properties["names"].Properties["kind"].Type; got != "string" {
		t.Errorf("Type spec.rest.names.kind type = %q, want string", got)
	}
}
