package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
)

// TestStackInGitOneCommitPerReconcile: the children of a FlagsEnv
// installation (examples/stacks/flags-env) are Flags, which a policy rule
// stores in a Git backend. Against a real cairn serve with the real
// kubectl and git, installing makes one commit holding every child, a
// parameter change one commit changing every child that carries it, and
// the deletion one commit removing them all.
func TestStackInGitOneCommitPerReconcile(t *testing.T) {
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
	// The Flag Type, the Git backend and the policy rule sending Flags to it.
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
	run(bin, "policy", "apply", "-f", "../../examples/stacks/git-backend/policy.yaml")

	srv := serveBinary(t, bin, env, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0", "--stack-resync", "2s")
	url := srv.URL
	k := func(args ...string) string {
		t.Helper()
		return run(kubectl, append([]string{"--server", url}, args...)...)
	}
	commits := func() int {
		t.Helper()
		cmd := exec.Command("git", "-C", bare, "rev-list", "--count", "main")
		out, err := cmd.Output()
		if err != nil {
			return 0 // no commit yet: main does not exist
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	files := func() string {
		t.Helper()
		return run("git", "-C", bare, "ls-tree", "-r", "--name-only", "main")
	}

	run(bin, "--server", url, "stack", "add", "../../examples/stacks/flags-env")
	if out := k("explain", "flagsenvs.spec"); !strings.Contains(out, "team") || !strings.Contains(out, "-required-") {
		t.Errorf("kubectl explain flagsenvs.spec:\n%s", out)
	}
	inst := filepath.Join(dir, "env.yaml")
	if err := os.WriteFile(inst, []byte("apiVersion: flags.stacks.cairn.dev/v1alpha1\nkind: FlagsEnv\nmetadata: {name: moon}\nspec: {team: moonshots}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k("apply", "-f", inst)
	k("wait", "--for=condition=Ready", "flagsenvs/moon", "--timeout=60s")
	if n := commits(); n != 1 {
		t.Fatalf("installing made %d commits, want 1:\n%s", n, run("git", "-C", bare, "log", "--format=%s", "main"))
	}
	if fs := files(); strings.Count(fs, "moon-") != 3 {
		t.Fatalf("files after the install:\n%s", fs)
	}
	msg := run("git", "-C", bare, "log", "-1", "--format=%B", "main")
	if !strings.Contains(msg, "create 3") || strings.Count(msg, "Cairn-Change: create") != 3 {
		t.Errorf("install commit message:\n%s", msg)
	}
	var tr struct {
		Installation struct{ Ready string }
		Children     []struct{ Backend, Synced, Ready string }
	}
	if err := json.Unmarshal([]byte(run(bin, "--server", url, "trace", "flagsenv/moon", "-o", "json")), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Installation.Ready != "True" || len(tr.Children) != 3 {
		t.Fatalf("trace -o json = %+v", tr)
	}
	for _, c := range tr.Children {
		if c.Backend != "flags-repo" || c.Synced != "True" || c.Ready != "True" {
			t.Errorf("trace child %+v, want in flags-repo, synced and ready", c)
		}
	}

	// A parameter change: one commit changing the three flags' descriptions.
	k("patch", "flagsenvs/moon", "--type=merge", "-p", `{"spec":{"team":"stars"}}`)
	deadline := time.Now().Add(30 * time.Second)
	for commits() < 2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a resync: nothing more may be committed
	if n := commits(); n != 2 {
		t.Fatalf("the parameter change made %d commits, want 1:\n%s", n-1, run("git", "-C", bare, "log", "--format=%s", "main"))
	}
	diff := run("git", "-C", bare, "show", "--stat", "--format=%s", "main")
	if !strings.Contains(diff, "3 files changed") {
		t.Errorf("the change's commit:\n%s", diff)
	}
	if show := run("git", "-C", bare, "show", "main:default/flipt.io-v1alpha1-Flag-moon-new-project.json"); !strings.Contains(show, "stars") {
		t.Errorf("the flag in Git after the change:\n%s", show)
	}

	// Deleting: children first (one commit), then the installation.
	k("delete", "flagsenvs/moon", "--wait=true", "--timeout=60s")
	if n := commits(); n != 3 {
		t.Fatalf("the deletion made %d commits, want 1:\n%s", n-2, run("git", "-C", bare, "log", "--format=%s", "main"))
	}
	if fs := files(); strings.Contains(fs, "moon-") {
		t.Fatalf("files left after the deletion:\n%s", fs)
	}
}
