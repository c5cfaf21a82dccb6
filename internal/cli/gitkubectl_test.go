package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
)

// TestKubectlApplyLandsInGit: a cup ResourceDefinition bound by a policy
// rule to a Git backend; a Flag written with the real kubectl against a
// real cairn serve becomes a file in the repository, committed by the
// user kubectl impersonates (issue 8, "done when").
func TestKubectlApplyLandsInGit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a server")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is required on CI: %v", err)
		}
		t.Skipf("!!! SKIPPED: kubectl is not installed: %v", err)
	}
	dir := t.TempDir()
	bin := cairnBinary(t)
	bare := filepath.Join(dir, "flags.git")
	if out, err := exec.Command("git", "init", "--bare", "--quiet", "--initial-branch=main", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	env := append(os.Environ(), "USER=admin", "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dir, "no-config.yaml"),
		"CAIRN_DATA_DIR="+filepath.Join(dir, "data"), "HOME="+dir, "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}

	// The Type, the Git backend and the policy rule, in local mode.
	value, _ := json.Marshal(map[string]any{"url": "file://" + bare, "acceptValue": true,
		"contextSchema": json.RawMessage(gitbackend.ContextSchema), "author": map[string]string{"name": "cairn", "email": "cairn@example.com"}})
	setup := filepath.Join(dir, "setup.json")
	if err := os.WriteFile(setup, []byte(`{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
  "metadata": {"name": "flags-repo", "namespace": "cairn-system", "alias": "flags-repo"},
  "spec": {"typeRef": {"path": "`+gitbackend.TypePath+`", "revision": "0.1.0"},
   "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}], "value": `+string(value)+`}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(bin, "apply", "-f", "../../examples/flags/flags.json", "-f", setup)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("typeInstance:\n  rules:\n  - typeRef: {path: io.flipt.flag}\n    backend: {id: flags-repo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(bin, "policy", "apply", "-f", policy)

	srv := serveBinary(t, bin, env, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0")

	out := run(kubectl, "--server", srv.URL, "--as", "jane", "apply", "-f", "../../examples/flags/new-project.yaml")
	if !strings.Contains(out, "flag.flipt.io/new-project created") {
		t.Fatalf("kubectl apply printed %q", out)
	}
	const file = "default/flipt.io-v1alpha1-Flag-new-project.json"
	show := run("git", "-C", bare, "show", "main:"+file)
	if !strings.Contains(show, `"enabled": true`) || !strings.Contains(show, `"team": "moonshots"`) {
		t.Errorf("%s in the repository:\n%s", file, show)
	}
	if got := run("git", "-C", bare, "log", "-1", "--format=%s", "main"); !strings.Contains(got, "create Flag default/new-project") || !strings.Contains(got, "by jane") {
		t.Errorf("commit message = %q, want the operation, the resource and the kubectl user", got)
	}

	// Dry runs of every verb and kubectl diff leave the repository alone:
	// no commit, no branch, no ref moved (issue 11).
	refs := run("git", "-C", bare, "for-each-ref", "--format=%(refname) %(objectname)")
	changed := filepath.Join(dir, "changed.yaml")
	raw, err := os.ReadFile("../../examples/flags/new-project.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, []byte(strings.Replace(string(raw), "enabled: true", "enabled: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(string(raw), "name: new-project", "name: other-project", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	k := func(args ...string) string {
		return run(kubectl, append([]string{"--server", srv.URL, "--as", "jane"}, args...)...)
	}
	k("create", "--dry-run=server", "-f", other)
	k("apply", "--dry-run=server", "-f", changed)
	k("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", changed)
	k("label", "--dry-run=server", "flag", "new-project", "x=y")
	k("delete", "--dry-run=server", "flag", "new-project")
	diff := exec.Command(kubectl, "--server", srv.URL, "diff", "-f", changed)
	diff.Env = env
	if out, err := diff.CombinedOutput(); !strings.Contains(string(out), "+  enabled: false") {
		t.Errorf("kubectl diff: %v\n%s", err, out)
	}
	if after := run("git", "-C", bare, "for-each-ref", "--format=%(refname) %(objectname)"); after != refs {
		t.Errorf("dry runs changed the repository's refs:\nbefore %s\nafter  %s", refs, after)
	}
	if got := k("get", "flag", "new-project", "-o", "jsonpath={.spec.enabled}"); got != "true" {
		t.Errorf("spec.enabled after the dry runs = %s", got)
	}
	get := exec.Command(kubectl, "--server", srv.URL, "get", "flag", "other-project")
	get.Env = env
	if out, err := get.CombinedOutput(); err == nil || !strings.Contains(string(out), "NotFound") {
		t.Errorf("a dry-run create made other-project: %v\n%s", err, out)
	}
}
