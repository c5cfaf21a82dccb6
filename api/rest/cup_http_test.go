package rest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The shapes flipt cup's CLI (cmd/cup) and cupd's API tests decode, as
// cup declares them (pkg/api/core): what a client of cupd sees of cairn's
// /cup API. They are written here from cup's documented wire format.
type (
	cupDef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Names struct {
			Kind     string `json:"kind"`
			Singular string `json:"singular"`
			Plural   string `json:"plural"`
		} `json:"names"`
		Spec struct {
			Group    string                     `json:"group"`
			Versions map[string]json.RawMessage `json:"versions,omitempty"`
		} `json:"spec"`
	}
	cupRes struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Metadata   cupMeta `json:"metadata"`
		Spec       json.RawMessage
	}
	cupMeta struct {
		Namespace   string            `json:"namespace"`
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	// cupResult is cupd's api.Result: a ULID and the proposal, if any.
	cupResult struct {
		ID       string
		Proposal *struct{ Source, URL string }
	}
)

// cupTestDef is the ResourceDefinition of cupd's own API tests.
const cupTestDef = `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"resources.test.cup.flipt.io"},"names":{"kind":"Resource","singular":"resource","plural":"resources"},"spec":{"group":"test.cup.flipt.io","versions":{"v1alpha1":{"type":"object","properties":{"spec":{"type":"object"}}}}}}`

const cupBaz = `{
  "apiVersion": "test.cup.flipt.io/v1alpha1",
  "kind": "Resource",
  "metadata": {
    "namespace": "default",
    "name": "baz",
    "labels": {
      "foo": "bar"
    },
    "annotations": {}
  },
  "spec": {}
}
`

// cupDo sends a request as cup's CLI does: Go's client, no Accept and no
// Content-Type header.
func (e *restEnv) cupDo(method, path, body string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+"/cup"+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: raw}
}

// cupDecodeAll decodes a stream of resources, as cup's encoding.DecodeAll.
func cupDecodeAll(t *testing.T, body []byte) []cupRes {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	var out []cupRes
	for dec.More() {
		var r cupRes
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decode stream: %v\n%s", err, body)
		}
		out = append(out, r)
	}
	return out
}

// TestCupAPI makes the requests of cupd's API tests (pkg/api) against
// cairn's /cup: definitions, get, list, put (which creates) and delete,
// with the status codes and shapes they assert.
func TestCupAPI(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", cupTestDef, http.StatusCreated)
	const coll = "/apis/test.cup.flipt.io/v1alpha1/namespaces/default/resources"

	// Definitions: a map of <group>/<version>/<plural> to the definition
	// exactly as it was loaded.
	r := e.cupDo("GET", "/apis", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET /cup/apis = %s", r)
	}
	var defs map[string]*cupDef
	if err := json.Unmarshal(r.body, &defs); err != nil {
		t.Fatalf("decode definitions: %v\n%s", err, r.body)
	}
	var want cupDef
	if err := json.Unmarshal([]byte(cupTestDef), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(defs, map[string]*cupDef{"test.cup.flipt.io/v1alpha1/resources": &want}) {
		t.Errorf("definitions = %s\nwant {%q: %s}", r.body, "test.cup.flipt.io/v1alpha1/resources", cupTestDef)
	}

	// Put creates: 202 and an empty Result, as cupd answers a change made
	// at once.
	{
		r = e.cupDo("PUT", coll+"/baz", cupBaz)
		if r.code != http.StatusAccepted {
			t.Fatalf("PUT baz = %s, want 202", r)
		}
		var res cupResult
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatalf("decode Result: %v\n%s", err, r.body)
		}
		if res.ID != "00000000000000000000000000" || res.Proposal != nil {
			t.Errorf("Result = %s, want the zero ULID and no proposal", r.body)
		}
	}
	// cupd reads a body as JSON whatever its Content-Type: curl -d sends
	// application/x-www-form-urlencoded.
	req, _ := http.NewRequestWithContext(e.ctx, "PUT", e.url+"/cup"+coll+"/curled", strings.NewReader(strings.ReplaceAll(cupBaz, "baz", "curled")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("PUT as curl -d sends it = %d, want 202", resp.StatusCode)
	}
	if r := e.cupDo("DELETE", coll+"/curled", ""); r.code != http.StatusAccepted {
		t.Errorf("DELETE curled = %s", r)
	}
	// The same again changes nothing: 204, cup's "no change".
	if r := e.cupDo("PUT", coll+"/baz", cupBaz); r.code != http.StatusNoContent || len(r.body) != 0 {
		t.Errorf("PUT of baz unchanged = %s, want 204 and no body", r)
	}
	r = e.cupDo("PUT", coll+"/foo", `{"apiVersion":"test.cup.flipt.io/v1alpha1","kind":"Resource","metadata":{"namespace":"default","name":"foo","labels":{"bar":"baz"}},"spec":{"bar":"foo"}}`)
	if r.code != http.StatusAccepted {
		t.Fatalf("PUT foo = %s", r)
	}

	// Get: one object, labels and annotations as objects, spec as stored.
	r = e.cupDo("GET", coll+"/baz", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET baz = %s", r)
	}
	got := cupDecodeAll(t, r.body)
	wantBaz := cupRes{APIVersion: "test.cup.flipt.io/v1alpha1", Kind: "Resource",
		Metadata: cupMeta{Namespace: "default", Name: "baz", Labels: map[string]string{"foo": "bar"}, Annotations: map[string]string{}},
		Spec:     json.RawMessage(`{}`)}
	if len(got) != 1 || !reflect.DeepEqual(got[0], wantBaz) {
		t.Errorf("GET baz = %s, want %+v", r.body, wantBaz)
	}

	// List: a stream of objects in name order.
	r = e.cupDo("GET", coll, "")
	if r.code != http.StatusOK {
		t.Fatalf("list = %s", r)
	}
	wantFoo := cupRes{APIVersion: "test.cup.flipt.io/v1alpha1", Kind: "Resource",
		Metadata: cupMeta{Namespace: "default", Name: "foo", Labels: map[string]string{"bar": "baz"}, Annotations: map[string]string{}},
		Spec:     json.RawMessage(`{"bar":"foo"}`)}
	if got := cupDecodeAll(t, r.body); !reflect.DeepEqual(got, []cupRes{wantBaz, wantFoo}) {
		t.Errorf("list = %s, want baz then foo", r.body)
	}
	if got := cupDecodeAll(t, e.cupDo("GET", "/apis/test.cup.flipt.io/v1alpha1/namespaces/other/resources", "").body); len(got) != 0 {
		t.Errorf("list of an empty namespace = %+v, want nothing", got)
	}

	// Put replaces whatever was there (cup sends no resourceVersion).
	r = e.cupDo("PUT", coll+"/baz", strings.Replace(cupBaz, `"foo": "bar"`, `"foo": "qux"`, 1))
	if r.code != http.StatusAccepted {
		t.Fatalf("PUT baz again = %s", r)
	}
	if got := cupDecodeAll(t, e.cupDo("GET", coll+"/baz", "").body); len(got) != 1 || got[0].Metadata.Labels["foo"] != "qux" {
		t.Errorf("after the replace baz = %+v, want label foo=qux", got)
	}

	// Delete: 202 and a Result; then the object is gone.
	r = e.cupDo("DELETE", coll+"/baz", "")
	if r.code != http.StatusAccepted {
		t.Fatalf("DELETE baz = %s, want 202", r)
	}
	var res cupResult
	if err := json.Unmarshal(r.body, &res); err != nil || res.ID != "00000000000000000000000000" || res.Proposal != nil {
		t.Errorf("DELETE Result = %s (%v)", r.body, err)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := e.cupDo(m, coll+"/baz", ""); r.code != http.StatusNotFound {
			t.Errorf("%s of the deleted baz = %s, want 404", m, r)
		}
	}

	// What cup would be refused on, with the reason.
	for _, c := range []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"name differs from the URL's", "PUT", coll + "/other", cupBaz, 400, "does not match the name on the URL"},
		{"namespace differs", "PUT", "/apis/test.cup.flipt.io/v1alpha1/namespaces/prod/resources/baz", cupBaz, 400, "does not match the namespace"},
		{"kind differs", "PUT", coll + "/baz", strings.Replace(cupBaz, `"Resource"`, `"Flag"`, 1), 422, "kind must be Resource"},
		{"not JSON", "PUT", coll + "/baz", "{", 400, "not a valid object"},
		{"unknown kind", "GET", "/apis/test.cup.flipt.io/v1alpha1/namespaces/default/widgets", "", 404, "widgets"},
		{"not a cup path", "GET", "/apis/test.cup.flipt.io/v1alpha1/resources", "", 404, "namespaces/NAMESPACE/PLURAL"},
		{"collection PUT", "PUT", coll, cupBaz, 405, ""},
		{"POST", "POST", coll, cupBaz, 405, ""},
	} {
		r := e.cupDo(c.method, c.path, c.body)
		if r.code != c.code || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s: %s %s = %s, want %d with %q", c.name, c.method, c.path, r, c.code, c.msg)
		}
	}
	if got := cupDecodeAll(t, e.cupDo("GET", coll, "").body); len(got) != 1 || got[0].Metadata.Name != "foo" {
		t.Errorf("after the refused requests the list = %+v, want foo alone", got)
	}

	// kubectl's /apis is unchanged: an APIGroupList, with or without an
	// Accept header.
	for _, accept := range []string{"", "application/json"} {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.url+"/apis", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var gl struct{ Kind string }
		err = json.NewDecoder(resp.Body).Decode(&gl)
		resp.Body.Close()
		if err != nil || gl.Kind != "APIGroupList" {
			t.Errorf("GET /apis (Accept %q) kind = %q (%v), want APIGroupList", accept, gl.Kind, err)
		}
	}
}

// TestEmptyPathSegment: a path with an empty segment (a namespace left
// empty, /namespaces//flags) is refused with 400 naming what is empty,
// on the Kubernetes paths and cup's alike; it is neither read as another
// path nor answered as a list of every namespace.
func TestEmptyPathSegment(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", cupTestDef, http.StatusCreated)
	for _, tc := range []struct {
		method, path string
		msgs         []string
	}{
		{"GET", "/apis/test.cup.flipt.io/v1alpha1/namespaces//resources", []string{"namespaces//resources", "the namespace is empty"}},
		{"PUT", "/apis/test.cup.flipt.io/v1alpha1/namespaces//resources/x", []string{"the namespace is empty"}},
		{"GET", "/cup/apis/test.cup.flipt.io/v1alpha1/namespaces//resources", []string{"the namespace is empty"}},
		{"DELETE", "/cup/apis/test.cup.flipt.io/v1alpha1/namespaces//resources/x", []string{"the namespace is empty"}},
		{"GET", "/apis/test.cup.flipt.io//namespaces/default/resources", []string{"an empty segment"}},
		{"GET", "/api/v1/namespaces//configmaps", []string{"the namespace is empty"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			e := e.with(t)
			wantStatus(t, e.do(tc.method, tc.path, "application/json", "{}"), http.StatusBadRequest, "BadRequest", tc.msgs...)
		})
	}
}

// TestCupCLI follows cup's CLI (cmd/cup) through its commands against the
// flags ResourceDefinition of two versions, one in the {"schema": ...}
// form: each command's requests, and what it decodes of the answers.
func TestCupCLI(t *testing.T) {
	e := newFlagsEnv(t)

	// cup defs: GET /apis, a row per key and version.
	defsOf := func() map[string]*cupDef {
		r := e.cupDo("GET", "/apis", "")
		var defs map[string]*cupDef
		if r.code != http.StatusOK || json.Unmarshal(r.body, &defs) != nil {
			t.Fatalf("GET /cup/apis = %s", r)
		}
		return defs
	}
	defs := defsOf()
	if len(defs) != 2 || defs["flipt.io/v1alpha1/flags"] == nil || defs["flipt.io/v1"+"/flags"] == nil {
		t.Fatalf("definitions keyed %v, want flipt.io/v1alpha1/flags and flipt.io/v1/flags", slices.Sorted(maps.Keys(defs)))
	}
	d := defs["flipt.io/v1/flags"]
	if d.Metadata.Name != "flags.flipt.io" || d.Names.Kind != "Flag" || d.Names.Singular != "flag" || d.Names.Plural != "flags" || d.Spec.Group != "flipt.io" {
		t.Errorf("definition = %+v", d)
	}
	// Every version's value is the JSON Schema of spec, as cup's
	// definitions have it, whatever form it was loaded in.
	if got := string(d.Spec.Versions["v1"]); !strings.Contains(got, `"description"`) || strings.Contains(got, `"schema"`) {
		t.Errorf("v1 schema = %s, want the schema inside {\"schema\": ...}", got)
	}
	if got := string(d.Spec.Versions["v1alpha1"]); !strings.Contains(got, `"required":["key"]`) {
		t.Errorf("v1alpha1 schema = %s", got)
	}

	// cup apply -f flag.json: the kind found by apiVersion/kind among the
	// definitions, PUT to its plural in the object's namespace.
	byGVK := map[string]*cupDef{}
	for _, d := range defs {
		for v := range d.Spec.Versions {
			byGVK[d.Spec.Group+"/"+v+"/"+d.Names.Kind] = d
		}
	}
	apply := func(doc string) response {
		var res cupRes
		if err := json.Unmarshal([]byte(doc), &res); err != nil {
			t.Fatal(err)
		}
		def := byGVK[res.APIVersion+"/"+res.Kind]
		if def == nil {
			t.Fatalf("unexpected resource kind: %s/%s", res.APIVersion, res.Kind)
		}
		return e.cupDo("PUT", "/apis/"+res.APIVersion+"/namespaces/"+res.Metadata.Namespace+"/"+def.Names.Plural+"/"+res.Metadata.Name, doc)
	}
	const flagDoc = `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"namespace":"prod","name":"new-project","labels":{"team":"moonshots"}},"spec":{"key":"new-project","enabled":true}}`
	if r := apply(flagDoc); r.code != http.StatusAccepted {
		t.Fatalf("cup apply = %s, want 202", r)
	}
	// A value against the schema is refused, naming the field; nothing is
	// written.
	if r := apply(strings.Replace(flagDoc, `"enabled":true`, `"enabled":"yes"`, 1)); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "spec.enabled") {
		t.Errorf("cup apply of a bad value = %s, want 422 naming spec.enabled", r)
	}

	// cup get flags / cup get Flag new-project with the context's
	// namespace: the kind resolved by plural or kind, any version.
	for _, v := range []string{"v1alpha1", "v1"} {
		coll := "/apis/flipt.io/" + v + "/namespaces/prod/flags"
		got := cupDecodeAll(t, e.cupDo("GET", coll, "").body)
		if len(got) != 1 || got[0].Metadata.Name != "new-project" || got[0].Metadata.Labels["team"] != "moonshots" ||
			got[0].APIVersion != "flipt.io/"+v || !strings.Contains(string(got[0].Spec), `"enabled":true`) {
			t.Errorf("cup get flags (%s) = %+v", v, got)
		}
		if got := cupDecodeAll(t, e.cupDo("GET", coll+"/new-project", "").body); len(got) != 1 || got[0].Metadata.Name != "new-project" {
			t.Errorf("cup get flags new-project (%s) = %+v", v, got)
		}
	}
	if got := cupDecodeAll(t, e.cupDo("GET", "/apis/flipt.io/v1alpha1/namespaces/default/flags", "").body); len(got) != 0 {
		t.Errorf("cup get flags in namespace default = %+v, want none", got)
	}

	// cup edit: what get answered, changed, applied again.
	r := e.cupDo("GET", "/apis/flipt.io/v1alpha1/namespaces/prod/flags/new-project", "")
	edited := strings.Replace(string(r.body), `"enabled":true`, `"enabled":false`, 1)
	if r := apply(edited); r.code != http.StatusAccepted {
		t.Fatalf("cup edit = %s", r)
	}
	if o := decodeObj(t, e.get(flagPath("prod", "new-project"))); o.Spec["enabled"] != false || o.Metadata.Generation != 2 {
		t.Errorf("after cup edit the Flag = %s, want enabled false at generation 2", o.Raw)
	}

	// cup delete flags new-project.
	if r := e.cupDo("DELETE", "/apis/flipt.io/v1alpha1/namespaces/prod/flags/new-project", ""); r.code != http.StatusAccepted {
		t.Errorf("cup delete = %s, want 202", r)
	}
	if r := e.get(flagPath("prod", "new-project")); r.code != http.StatusNotFound {
		t.Errorf("after cup delete: %s", r)
	}
}
