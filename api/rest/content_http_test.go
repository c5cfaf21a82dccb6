package rest_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyMediaTypes: YAML wherever JSON is accepted; other media types
// refused with 415, changing nothing.
func TestBodyMediaTypes(t *testing.T) {
	e := newFlagsEnv(t)
	yamlFlag := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata:\n  name: yml\n  labels: {team: a}\nspec:\n  key: yml\n  port: 80\n"
	created := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/yaml", yamlFlag, http.StatusCreated))
	if created.Spec["port"] != float64(80) || created.Metadata.Labels["team"] != "a" {
		t.Errorf("YAML create = %s", created.Raw)
	}
	replaced := decodeObj(t, e.mustDo("PUT", flagPath("default", "yml"), "application/yaml; charset=utf-8",
		strings.Replace(yamlFlag, "port: 80", "port: 81", 1), http.StatusOK))
	if replaced.Spec["port"] != float64(81) {
		t.Errorf("YAML replace = %s", replaced.Raw)
	}
	ti := decodeObj(t, e.get(hubGV+"/typeinstances/"+created.Metadata.UID))
	e.mustDo("PUT", hubGV+"/typeinstances/"+created.Metadata.UID, "application/yaml",
		"metadata: {labels: {team: b}}\nspec: {value: {key: yml, port: 82}}\n", http.StatusOK)
	if got := decodeObj(t, e.get(flagPath("default", "yml"))); got.Spec["port"] != float64(82) || got.Metadata.Labels["team"] != "b" || ti.Metadata.UID == "" {
		t.Errorf("YAML TypeInstance replace gave %s", got.Raw)
	}
	wantStatus(t, e.do("POST", flagsIn("default"), "application/yaml", "metadata: [not: an object"), http.StatusBadRequest, "BadRequest", "not valid YAML")

	before := decodeObj(t, e.get(flagPath("default", "yml"))).Metadata.ResourceVersion
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/vnd.kubernetes.protobuf", "not a media type"} {
		body := `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"z"},"spec":{"key":"z"}}`
		wantStatus(t, e.do("POST", flagsIn("default"), ct, body), http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			"accepted media types include: application/json, application/yaml")
		wantStatus(t, e.do("PUT", flagPath("default", "yml"), ct, body), http.StatusUnsupportedMediaType, "UnsupportedMediaType")
	}
	if r := e.get(flagPath("default", "z")); r.code != http.StatusNotFound {
		t.Errorf("a refused body created the object: %s", r)
	}
	if after := decodeObj(t, e.get(flagPath("default", "yml"))).Metadata.ResourceVersion; after != before {
		t.Errorf("a refused body changed the object (%s -> %s)", before, after)
	}
}

// TestUnknownFields: warned about by default (Warning header, every field
// named), refused under fieldValidation=Strict, silent under Ignore.
func TestUnknownFields(t *testing.T) {
	e := newFlagsEnv(t)
	body := `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"u","colour":"red"},"spec":{"key":"u"},"extra":1}`
	r := e.mustDo("POST", flagsIn("default"), "application/json", body, http.StatusCreated)
	warnings := r.header.Values("Warning")
	want := []string{`299 - "unknown field \"extra\""`, `299 - "unknown field \"metadata.colour\""`}
	if strings.Join(warnings, "|") != strings.Join(want, "|") {
		t.Errorf("Warning headers = %q, want %q", warnings, want)
	}
	r = e.do("PUT", flagPath("default", "u")+"?fieldValidation=Strict", "application/json", body)
	wantStatus(t, r, http.StatusBadRequest, "BadRequest", `strict decoding error: unknown field "extra", unknown field "metadata.colour"`)
	r = e.mustDo("PUT", flagPath("default", "u")+"?fieldValidation=Ignore", "application/json", body, http.StatusOK)
	if w := r.header.Values("Warning"); len(w) != 0 {
		t.Errorf("fieldValidation=Ignore warned: %q", w)
	}
	wantStatus(t, e.do("PUT", flagPath("default", "u")+"?fieldValidation=Loud", "application/json", body), http.StatusBadRequest, "BadRequest", "fieldValidation")
	// A merge patch that adds an unknown field is warned about too.
	r = e.mustDo("PATCH", flagPath("default", "u"), "application/merge-patch+json", `{"metadata":{"shade":"dark"}}`, http.StatusOK)
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], "metadata.shade") {
		t.Errorf("merge patch warnings = %q", w)
	}
}

// TestKubectlWarnings: kubectl prints the server's warnings, and its
// default strict validation is refused naming the field.
func TestKubectlWarnings(t *testing.T) {
	_, k := newKubectlEnv(t)
	k.file("odd.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: odd, colour: red}\nspec: {key: odd}\n")
	k.fails([]string{`unknown field "metadata.colour"`}, "create", "-f", "odd.yaml")
	_, errOut, code := k.run("create", "--validate=warn", "-f", "odd.yaml")
	if code != 0 || !strings.Contains(errOut, `Warning: unknown field "metadata.colour"`) {
		t.Errorf("kubectl create --validate=warn: exit %d, stderr %q", code, errOut)
	}
}
