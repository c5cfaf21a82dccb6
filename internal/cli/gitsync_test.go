package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/internal/cli"
)

// gitAs runs the real git as Jane Doe in dir.
func gitAs(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Jane Doe", "-c", "user.email=jane@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestServeGitSyncWebhook: `cairn serve --git-sync-interval 0` does not
// poll, and POST /hooks/git/{alias} imports a Flag pushed with git at
// once: served over REST, counted in /metrics.
func TestServeGitSyncWebhook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	bare := filepath.Join(t.TempDir(), "flags.git")
	gitAs(t, "", "init", "--bare", "--quiet", "--initial-branch=main", bare)
	value, _ := json.Marshal(map[string]any{"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema)})
	dir := t.TempDir()
	docs := `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"}, "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {"v1": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}}}}
{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "flags-repo", "namespace": "cairn-system", "alias": "flags-repo"},
 "spec": {"typeRef": {"path": "` + gitbackend.TypePath + `", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}],
  "value": ` + string(value) + `}}`
	if err := os.WriteFile(filepath.Join(dir, "setup.json"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{cli.EnvDataDir: filepath.Join(dir, "data")}
	if r := runVars(t, vars, "apply", "-f", filepath.Join(dir, "setup.json")); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	clone := filepath.Join(t.TempDir(), "clone")
	gitAs(t, "", "clone", "--quiet", "file://"+bare, clone)
	if err := os.MkdirAll(filepath.Join(clone, "default"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "default", "flipt.io-v1-Flag-pushed.json"), []byte(`{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"pushed"},"spec":{"enabled":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gitAs(t, clone, "add", "-A")
	gitAs(t, clone, "commit", "--quiet", "-m", "add pushed")
	gitAs(t, clone, "push", "--quiet", "origin", "HEAD:main")

	base := startServe(t, vars, "--git-sync-interval", "0")
	get := func(path string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	const flagURL = "/apis/flipt.io/v1/namespaces/default/flags/pushed"
	if code, body := get(flagURL); code != http.StatusNotFound {
		t.Fatalf("before the webhook (no polling): %d %s, want 404", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/hooks/git/flags-repo", strings.NewReader(`{"object_kind":"push","ref":"refs/heads/main"}`))
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"created":1`) {
		t.Fatalf("webhook: %d %s, want 200 and one creation", resp.StatusCode, body)
	}
	code, got := get(flagURL)
	if code != http.StatusOK || !strings.Contains(strings.ReplaceAll(got, " ", ""), `"enabled":true`) {
		t.Fatalf("after the webhook: %d %s", code, got)
	}
	if !strings.Contains(got, "Jane Doe") {
		t.Errorf("the imported Flag does not name its author: %s", got)
	}
	if code, status := get("/hooks/git/flags-repo"); code != http.StatusOK || !strings.Contains(status, `"type":"Created"`) || !strings.Contains(status, "flipt.io-v1-Flag-pushed.json") {
		t.Errorf("GET /hooks/git/flags-repo = %d %s, want the creation among the events", code, status)
	}
	if _, metrics := get("/metrics"); !strings.Contains(metrics, `result="created"} 1`) {
		t.Errorf("/metrics has no created count of 1:\n%s", grepLines(metrics, "cairn_git_sync"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
