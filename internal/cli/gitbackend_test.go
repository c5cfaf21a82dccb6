package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
)

// The hub knows the Git backend's storage Type, so strict mode accepts Git
// backend instances and their values are checked against it.
func TestGitStorageTypeRegistered(t *testing.T) {
	e := newEnv(t)
	out := e.ok("types", "get", gitbackend.TypePath+":0.1.0", "-o", "json")
	if !strings.Contains(out, `"url"`) {
		t.Errorf("types get %s = %s, want its schema", gitbackend.TypePath, out)
	}
	doc := func(value string) string {
		return `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "repo", "namespace": "cairn-system"},
 "spec": {"typeRef": {"path": "` + gitbackend.TypePath + `", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}], "value": ` + value + `}}`
	}
	good, _ := json.Marshal(map[string]any{"url": "file:///nowhere.git", "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema)})
	if r := e.run(doc(string(good)), "--strict", "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("strict apply of a Git backend: exit %d\n%s", r.code, r.stderr)
	}
	r := e.run(strings.Replace(doc(`{"url": 5, "acceptValue": true, "contextSchema": null}`), `"name": "repo"`, `"name": "bad"`, 1), "--strict", "apply", "-f", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "spec.value.url must be string") {
		t.Errorf("a Git backend value breaking its Type: exit %d, %s", r.code, r.stderr)
	}
}

// TestGitBackendSettingsCheckedOnApply: a Git backend whose own settings
// cannot work (a password in the url, propose without scm, a path template
// that does not parse or calls an unknown function, a WASM controller
// without a module) is refused when it is applied, naming what is wrong,
// and nothing is stored; before, it was created and every write through
// it failed. Updating a working backend into such settings is refused too
// and leaves it as it was.
func TestGitBackendSettingsCheckedOnApply(t *testing.T) {
	e := newEnv(t)
	doc := func(name string, value map[string]any) string {
		value["url"] = map[bool]any{true: value["url"], false: "file:///nowhere.git"}[value["url"] != nil]
		value["acceptValue"] = true
		value["contextSchema"] = json.RawMessage(gitbackend.ContextSchema)
		v, _ := json.Marshal(value)
		return `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "` + name + `", "namespace": "cairn-system", "alias": "` + name + `"},
 "spec": {"typeRef": {"path": "` + gitbackend.TypePath + `", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}], "value": ` + string(v) + `}}`
	}
	for _, tt := range []struct {
		name  string
		value map[string]any
		want  string
	}{
		{"password", map[string]any{"url": "https://x:s3cr3t@example.com/r.git"}, "the url holds a password"},
		{"propose", map[string]any{"mode": "propose"}, `mode "propose" needs scm`},
		{"template", map[string]any{"paths": map[string]any{"resource": "{{ .Name }.json"}}, "paths.resource"},
		{"func", map[string]any{"paths": map[string]any{"list": "{{ lower .Namespace }}/*.json"}}, `paths.list: template: list:1: function "lower" not defined`},
		{"wasm", map[string]any{"controller": map[string]any{"wasm": map[string]any{}}}, "controller.wasm.module"},
		{"sha", map[string]any{"controller": map[string]any{"wasm": map[string]any{"module": "c.wasm", "sha256": "9f2c"}}}, "controller.wasm.sha256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(doc("bad-"+tt.name, tt.value), "apply", "-f", "-")
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("apply: exit %d, stderr %s; want 2 and %q", r.code, r.stderr, tt.want)
			}
			if strings.Contains(r.stderr, "s3cr3t") {
				t.Errorf("the error quotes the password: %s", r.stderr)
			}
			if out := e.ok("get", "backends"); strings.Contains(out, "bad-"+tt.name) {
				t.Errorf("the refused backend was stored:\n%s", out)
			}
		})
	}
	if r := e.run(doc("good", map[string]any{}), "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("apply of a working Git backend: exit %d\n%s", r.code, r.stderr)
	}
	r := e.run(doc("good", map[string]any{"paths": map[string]any{"resource": "{{ .Nme }}.json"}}), "apply", "-f", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "paths.resource") {
		t.Errorf("update into a broken path template: exit %d, stdout %s stderr %s", r.code, r.stdout, r.stderr)
	}
	if out := e.ok("get", "backends", "good", "-o", "yaml"); strings.Contains(out, "Nme") {
		t.Errorf("the refused update was stored:\n%s", out)
	}
}
