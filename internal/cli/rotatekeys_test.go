package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairn-dev/cairn/internal/cli"
)

// TestBackendsRotateKeys: credentials sent by policy to a SOPS-encrypted Git
// backend; cairn backends rotate-keys re-encrypts the file to a new
// recipient in one commit, in local mode and then through a server, and the
// value stays readable; bad requests change nothing.
func TestBackendsRotateKeys(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	vars := map[string]string{cli.EnvDataDir: data, "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	ids := make([]*age.X25519Identity, 3)
	var keys strings.Builder
	for i := range ids {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
		keys.WriteString(id.String() + "\n")
	}
	rcp := func(i int) string { return ids[i].Recipient().String() }
	keyFile := filepath.Join(dir, "age.key")
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("age.key", keys.String())
	repo := filepath.Join(dir, "secrets.git")
	if out, err := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch=main", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"--git-dir", repo}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	backend := write("backend.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: secrets-repo, namespace: cairn-system, alias: secrets-repo}
spec:
  typeRef: {path: cap.core.type.hub.storage.git, revision: 0.1.0}
  attributes: [{path: cap.core.attribute.hub.storage.backend, revision: 0.1.0}]
  value:
    url: file://`+repo+`
    acceptValue: true
    contextSchema: {type: object}
    author: {name: cairn, email: cairn@example.com}
    encryption: {sops: {age: [`+rcp(0)+`], ageKeyFile: `+keyFile+`}}
`)
	run := func(wantOK bool, args ...string) result {
		t.Helper()
		r := runVars(t, vars, args...)
		if (r.code == 0) != wantOK {
			t.Fatalf("cairn %v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	run(true, "apply", "-f", "../../examples/secrets/00-types.yaml", "-f", backend)
	run(true, "policy", "apply", "-f", "../../examples/secrets/policy.yaml")
	run(true, "apply", "-f", "../../examples/secrets/db-credentials.yaml")
	const file = "main:default/database.cairn.dev-v1-PostgresCredentials-orders-db.json"
	recipients := func() string {
		t.Helper()
		var got []string
		for _, l := range strings.Split(git("show", file), "\n") {
			if strings.Contains(l, `"recipient"`) {
				got = append(got, strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), `"recipient":`)), `",`))
			}
		}
		return strings.Join(got, ",")
	}
	if got := recipients(); got != rcp(0) {
		t.Fatalf("recipients before = %s", got)
	}
	readable := func() {
		t.Helper()
		if r := run(true, "get", "cap.type.database.postgresql.credentials", "orders-db", "-o", "json"); !strings.Contains(r.stdout, "correct-horse-battery-staple") {
			t.Fatalf("the value is not readable: %s", r.stdout)
		}
	}
	readable()
	commits := func() int { return strings.Count(git("log", "--oneline", "main"), "\n") }
	before := commits()

	// Refused, nothing changed.
	if r := run(false, "backends", "rotate-keys", "secrets-repo", "--remove-age", rcp(2)); !strings.Contains(r.stderr, "not a recipient of Git backend") {
		t.Errorf("removing a stranger: %s", r.stderr)
	}
	if r := run(false, "backends", "rotate-keys", "secrets-repo", "--remove-age", rcp(0)); !strings.Contains(r.stderr, "age") {
		t.Errorf("removing the last recipient: %s", r.stderr)
	}
	if r := run(false, "backends", "rotate-keys", "cairn-builtin", "--add-age", rcp(1)); !strings.Contains(r.stderr, "does not encrypt with rotatable keys") {
		t.Errorf("the built-in backend: %s", r.stderr)
	}
	run(false, "backends", "rotate-keys", "secrets-repo")
	// A recipient whose identity is not in the key file: the backend
	// could not read its files after the rotation.
	stranger, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if r := run(false, "backends", "rotate-keys", "secrets-repo", "--add-age", stranger.Recipient().String(), "--remove-age", rcp(0)); !strings.Contains(r.stderr, "no matching identity in ageKeyFile "+keyFile) {
		t.Errorf("rotating to a recipient the backend cannot read: %s", r.stderr)
	}
	readable()
	if commits() != before || recipients() != rcp(0) {
		t.Fatal("a refused rotation changed the repository")
	}

	// Local mode: one commit, the new recipient only.
	r := run(true, "backends", "rotate-keys", "secrets-repo", "--add-age", rcp(1), "--remove-age", rcp(0))
	if !strings.Contains(r.stdout, "1 files re-encrypted") {
		t.Errorf("rotate-keys said %q", r.stdout)
	}
	if commits() != before+1 || recipients() != rcp(1) {
		t.Fatalf("after rotating: %d commits (want %d), recipients %s", commits(), before+1, recipients())
	}
	readable()

	// Through a server: the REST subresource, the same result.
	url, _, stop := startServeLogged(t, vars)
	r = run(true, "--server", url, "backends", "rotate-keys", "secrets-repo", "--add-age", rcp(2), "-o", "json")
	if !strings.Contains(r.stdout, `"files": 1`) {
		t.Errorf("rotate-keys -o json over REST: %s", r.stdout)
	}
	if commits() != before+2 || recipients() != rcp(1)+","+rcp(2) {
		t.Fatalf("after rotating over REST: %d commits, recipients %s", commits(), recipients())
	}
	run(true, "--server", url, "apply", "-f", "../../examples/secrets/db-credentials.yaml")
	stop()
	readable()
}
