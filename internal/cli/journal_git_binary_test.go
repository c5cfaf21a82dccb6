package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
)

// stallHook is a hook of the test's bare repository: when the test asked
// for a stall at this hook (a file stall-<when> in ctl), it says so
// (stalled) and waits until the test releases it (release); pre-receive
// then refuses the push, so a push stalled before the refs moved never
// lands.
const stallHook = `#!/bin/sh
cat >/dev/null
if [ -e "$CTL/stall-$WHEN" ]; then
	rm -f "$CTL/stall-$WHEN"
	touch "$CTL/stalled"
	while [ ! -e "$CTL/release" ]; do sleep 0.05; done
	rm -f "$CTL/release"
	[ "$WHEN" = before ] && exit 1
fi
exit 0
`

// TestKilledMidGitWriteRecovers kills a real cairn serve (SIGKILL) while
// its Git backend pushes a create, an update or a delete to the remote, as
// the remote's pre-receive hook (before the branch moved) or post-receive
// hook (after) holds the push, restarts it, and checks that recovery
// leaves the branch holding exactly the hub's instances with their latest
// values.
func TestKilledMidGitWriteRecovers(t *testing.T) {
	b := newBackupBinary(t)
	dir := t.TempDir()
	data, ctl, bare := filepath.Join(dir, "data"), filepath.Join(dir, "ctl"), filepath.Join(dir, "flags.git")
	if err := os.Mkdir(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", bare}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out, err := exec.Command("git", "init", "--bare", "--quiet", "--initial-branch=main", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	for hook, when := range map[string]string{"pre-receive": "before", "post-receive": "after"} {
		script := strings.Replace(stallHook, "#!/bin/sh\n", "#!/bin/sh\nCTL='"+ctl+"' WHEN="+when+"\n", 1)
		if err := os.WriteFile(filepath.Join(bare, "hooks", hook), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}

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
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("typeInstance:\n  rules:\n  - typeRef: {path: io.flipt.flag}\n    backend: {id: flags-repo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.must("--data-dir", data, "apply", "-f", "../../examples/flags/flags.json", "-f", setup)
	b.must("--data-dir", data, "policy", "apply", "-f", policy)
	flag := func(name, description string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte("apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: "+name+", namespace: default}\nspec: {enabled: true, description: "+description+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	serveArgs := []string{"--recovery-grace", "1s", "--recovery-interval", "300ms"}
	url, stop := b.serve(data, serveArgs...)
	for _, name := range []string{"kept", "doomed"} {
		b.must("--server", url, "apply", "-f", flag(name, "v1"))
	}
	gitConsistent(t, b, url, git, "setup")
	stop()

	// onBranch is the description of a flag's file on the branch, "" when
	// there is none.
	onBranch := func(name string) string {
		f := "default/flipt.io-v1alpha1-Flag-" + name + ".json"
		if !strings.Contains(git("ls-tree", "-r", "--name-only", "main"), f) {
			return ""
		}
		var res struct{ Spec struct{ Description string } }
		if err := json.Unmarshal([]byte(git("show", "main:"+f)), &res); err != nil {
			t.Fatal(err)
		}
		return res.Spec.Description
	}
	steps := []struct {
		name, when string
		args       []string
		flag, file string // what the branch holds of flag after the kill
	}{
		{"create, killed before the push landed", "before", []string{"apply", "-f", flag("never-1", "v1")}, "never-1", ""},
		{"create, killed after the push landed", "after", []string{"apply", "-f", flag("never-2", "v1")}, "never-2", "v1"},
		{"update, killed after the push landed", "after", []string{"apply", "-f", flag("kept", "v2")}, "kept", "v2"},
		// A delete is pushed after its commit: the hub no longer has it.
		{"delete, killed before the push landed", "before", []string{"delete", "-f", flag("doomed", "v1")}, "doomed", "v1"},
	}
	for _, step := range steps {
		srv, url := b.start(data, serveArgs...)
		if err := os.WriteFile(filepath.Join(ctl, "stall-"+step.when), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		client := exec.Command(b.bin, append([]string{"--server", url}, step.args...)...)
		client.Env = b.env
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(ctl, "stalled"), true, step.name+": the push never reached the hook")
		if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = srv.Wait()
		_ = client.Wait()
		// Let the hook go (a push held before the branch moved is
		// refused) and wait until it has.
		os.Remove(filepath.Join(ctl, "stalled"))
		if err := os.WriteFile(filepath.Join(ctl, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(ctl, "release"), false, step.name+": the hook did not end")
		if n := len(intents(t, data)); n != 1 {
			t.Fatalf("%s: %d intents in the journal after the kill, want 1", step.name, n)
		}
		if got := onBranch(step.flag); got != step.file {
			t.Fatalf("%s: the branch holds %q of %s, want %q", step.name, got, step.flag, step.file)
		}

		url, stop := b.serve(data, serveArgs...)
		deadline := time.Now().Add(20 * time.Second)
		for len(intents(t, data)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if in := intents(t, data); len(in) > 0 {
			t.Fatalf("%s: recovery left %+v", step.name, in)
		}
		gitConsistent(t, b, url, git, step.name)
		stop()
	}
}

// gitConsistent checks that the branch holds a file for every Flag the hub
// has, with the hub's latest value, and nothing else.
func gitConsistent(t *testing.T, b *backupBinary, url string, git func(...string) string, step string) {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     map[string]any
		}
	}
	if out := b.must("--server", url, "get", "flags", "-o", "json"); json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("%s: get flags: %s", step, out)
	}
	hub := map[string]map[string]any{}
	for _, it := range list.Items {
		hub["default/flipt.io-v1alpha1-Flag-"+it.Metadata.Name+".json"] = it.Spec
	}
	files := strings.Fields(git("ls-tree", "-r", "--name-only", "main"))
	for _, f := range files {
		spec, known := hub[f]
		if !known {
			t.Errorf("%s: the branch holds %s, which the hub does not know", step, f)
			continue
		}
		var res struct{ Spec map[string]any }
		if err := json.Unmarshal([]byte(git("show", "main:"+f)), &res); err != nil || !reflect.DeepEqual(res.Spec, spec) {
			t.Errorf("%s: %s holds %v (%v), the hub %v", step, f, res.Spec, err, spec)
		}
		delete(hub, f)
	}
	for f := range hub {
		t.Errorf("%s: the hub has %s, the branch does not", step, f)
	}
}

func waitFile(t *testing.T, path string, exists bool, msg string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); (err == nil) == exists {
			return
		}
	}
	t.Fatal(msg)
}
