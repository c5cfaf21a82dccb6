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
	if r.code != 2 || !strings.Contains(r.stderr, "spec/value/url must be string") {
		t.Errorf("a Git backend value breaking its Type: exit %d, %s", r.code, r.stderr)
	}
}
