package git_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestRESTCreateLandsInTheRepository: a cup Flag Type bound to a Git
// backend by a policy rule; a REST create, update and delete through
// api/rest become commits on the bare repository, by the request's user.
func TestRESTCreateLandsInTheRepository(t *testing.T) {
	r := newRemote(t)
	url := r.serveHTTP(t)
	ctx := cairn.WithActor(context.Background(), "admin")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: git.NewOpener(git.OpenerConfig{CacheDir: t.TempDir()})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateType(ctx, cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names:      &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"enabled":{"type":"boolean"}}}`)}); err != nil {
		t.Fatalf("CreateType: %v", err)
	}
	value, _ := json.Marshal(map[string]any{"url": url, "acceptValue": true, "contextSchema": json.RawMessage(git.ContextSchema),
		"branch": "main", "author": map[string]string{"name": "cairn", "email": "cairn@example.com"}})
	reg, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "flags-repo", Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: git.TypePath, Revision: cairn.CoreRevision}, Value: value,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatalf("register the Git backend: %v", err)
	}
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "io.flipt.flag"}, Backend: policy.BackendRef{ID: reg[0].ID}}}}}); err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)
	base := srv.URL + "/apis/flipt.io/v1/namespaces/default/flags"

	do := func(method, url, body string, want int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Impersonate-User", "jane")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, data, want)
		}
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		return out
	}
	do("POST", base, `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"new-project","labels":{"team":"moonshots"}},"spec":{"enabled":true}}`, http.StatusCreated)

	const file = "default/flipt.io-v1-Flag-new-project.json"
	if got := specOf(t, r.show(t, "", file)); !bytes.Contains(got, []byte(`"enabled": true`)) {
		t.Errorf("spec in the repository = %s", got)
	}
	if got := gitCmd(t, r.path, "log", "-1", "--format=%s", "main"); got != "cairn: create Flag default/new-project (resource version 1) by jane" {
		t.Errorf("commit = %q", got)
	}
	if got := r.show(t, "", file); !strings.Contains(got, `"team": "moonshots"`) {
		t.Errorf("labels are not in the file:\n%s", got)
	}
	created := r.commits(t)

	obj := do("GET", base+"/new-project", "", http.StatusOK)
	obj["spec"] = map[string]any{"enabled": false}
	body, _ := json.Marshal(obj)
	do("PUT", base+"/new-project", string(body), http.StatusOK)
	if got := specOf(t, r.show(t, "", file)); !bytes.Contains(got, []byte(`"enabled": false`)) {
		t.Errorf("spec after PUT = %s", got)
	}
	got := do("GET", base+"/new-project", "", http.StatusOK)
	ctxDoc := got["status"].(map[string]any)["backend"].(map[string]any)["context"].(map[string]any)
	if ctxDoc["commit"] != gitCmd(t, r.path, "rev-parse", "main") {
		t.Errorf("status.backend.context = %v, want the commit of main", ctxDoc)
	}
	if got["spec"].(map[string]any)["enabled"] != false {
		t.Errorf("GET spec = %v", got["spec"])
	}
	// Version 1 is still the file at its commit.
	inst, err := h.GetInstance(ctx, got["metadata"].(map[string]any)["uid"].(string), false)
	if err != nil {
		t.Fatal(err)
	}
	if v1, err := h.ResourceVersion(ctx, inst.ID, 1, true); err != nil || string(v1.Value) != `{"enabled":true}` {
		t.Errorf("value of version 1 = %s, %v; want the first file's spec", v1.Value, err)
	}
	do("DELETE", base+"/new-project", "", http.StatusOK)
	if n := r.commits(t); n != created+2 {
		t.Errorf("%d commits after create, update and delete, want %d", n, created+2)
	}
	if files := gitCmd(t, r.path, "ls-tree", "-r", "--name-only", "main"); files != "" {
		t.Errorf("files left on main: %s", files)
	}
}
