package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
)

// buildExampleController builds examples/wasm-controller for wasip1; a
// toolchain that cannot is a loud skip, and a failure on CI.
func buildExampleController(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ctl.wasm")
	cmd := exec.Command("go", "build", "-o", out, "../../examples/wasm-controller")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("GOOS=wasip1 GOARCH=wasm go build: %v\n%s", err, msg)
		}
		t.Skipf("!!! SKIPPED: cannot build the example WASM controller: %v\n%s", err, msg)
	}
	return out
}

// TestGitBackendWithWASMController: a Git backend whose value names a WASM
// controller (pinned by SHA-256) stores an instance applied with the CLI
// where that controller puts it, not where the template controller would.
func TestGitBackendWithWASMController(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	module := buildExampleController(t)
	data, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)

	bare := filepath.Join(t.TempDir(), "flags.git")
	if out, err := exec.Command("git", "init", "--bare", "--quiet", "--initial-branch=main", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	value, _ := json.Marshal(map[string]any{
		"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
		"controller": map[string]any{"wasm": map[string]any{"module": module, "sha256": hex.EncodeToString(sum[:])}},
	})
	dir := t.TempDir()
	docs := map[string]string{
		"10-flags.json": `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"}, "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {"v1": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}}}}`,
		"20-repo.json": `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "flags-repo", "namespace": "cairn-system", "alias": "flags-repo"},
 "spec": {"typeRef": {"path": "` + gitbackend.TypePath + `", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}],
  "value": ` + string(value) + `}}`,
		"30-flag.json": `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "new-project", "labels": {"team": "moonshots"}},
 "spec": {"typeRef": {"path": "io.flipt.flag", "revision": "1.0.0"}, "backend": {"id": "flags-repo"}, "value": {"enabled": true}}}`,
	}
	for name, doc := range docs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t)
	// The backend first: a document's backend alias must name a stored one.
	e.ok("apply", "-f", filepath.Join(dir, "10-flags.json"), "-f", filepath.Join(dir, "20-repo.json"))
	e.ok("apply", "-f", filepath.Join(dir, "30-flag.json"))

	files, err := exec.Command("git", "-C", bare, "ls-tree", "-r", "--name-only", "main").CombinedOutput()
	if err != nil {
		t.Fatalf("git ls-tree: %v\n%s", err, files)
	}
	const want = "default/flag.flipt.io/new-project.yaml" // the example controller's layout
	if !strings.Contains(string(files), want) {
		t.Fatalf("repository files:\n%s\nwant %s (the WASM controller's layout)", files, want)
	}
	content, err := exec.Command("git", "-C", bare, "show", "main:"+want).CombinedOutput()
	if err != nil || !strings.Contains(string(content), "enabled: true") || !strings.Contains(string(content), "team: moonshots") {
		t.Fatalf("%s = %s (%v), want the resource as YAML", want, content, err)
	}
	// Read back through the hub, the Git backend and the controller.
	if got := e.ok("get", "io.flipt.flag", "new-project", "-o", "json"); !strings.Contains(strings.ReplaceAll(got, " ", ""), `"enabled":true`) {
		t.Errorf("value read back = %s", got)
	}

	// A module whose digest does not match the pinned one is refused, and
	// nothing is stored.
	bad, _ := json.Marshal(map[string]any{
		"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
		"controller": map[string]any{"wasm": map[string]any{"module": module, "sha256": strings.Repeat("0", 64)}},
	})
	e.run(`{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "flags-repo-2", "namespace": "cairn-system", "alias": "flags-repo-2"},
 "spec": {"typeRef": {"path": "`+gitbackend.TypePath+`", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}],
  "value": `+string(bad)+`}}`, "apply", "-f", "-")
	r := e.run(`{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "other"},
 "spec": {"typeRef": {"path": "io.flipt.flag", "revision": "1.0.0"}, "backend": {"id": "flags-repo-2"}, "value": {"enabled": false}}}`, "apply", "-f", "-")
	if r.code == 0 || !strings.Contains(r.stderr, "the configuration pins") {
		t.Errorf("create in a backend pinning another module: exit %d, stderr %s; want a SHA-256 mismatch", r.code, r.stderr)
	}
	if files, _ := exec.Command("git", "-C", bare, "ls-tree", "-r", "--name-only", "main").CombinedOutput(); strings.Contains(string(files), "other") {
		t.Errorf("the refused instance reached the repository:\n%s", files)
	}
}
