package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store"
)

// The walkthrough from the CLI: a policy sends cap.type.aws.* to the
// example file backend and everything else to the built-in one; instances
// created without a backend land where it says.
func TestPolicyCommands(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		values := t.TempDir()
		addr, _ := serveFileBackend(t, file.Config{Dir: values})
		files := decode[backendJSON](t, e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files", "-o", "json"))

		if out := e.ok("policy", "get"); !strings.Contains(out, "No policy applied") {
			t.Errorf("policy get before apply: %q", out)
		}
		dir := t.TempDir()
		write := func(name, body string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		bad := write("bad.yaml", `
typeInstance:
  rules:
    - typeRef: {path: cap.type.aws.*}
      backend: {id: nope}
    - typeRef: {path: "cap.*"}
      backend: {id: 00000000-0000-4000-8000-000000000000}
`)
		r := e.run("", "policy", "apply", "-f", bad)
		// The hub's spelling of a field, or the REST API's.
		rule := func(i int) *regexp.Regexp {
			return regexp.MustCompile(fmt.Sprintf(`typeInstance(/rules/%d/|\.rules\[%d\]\.)backend[/.]id`, i, i))
		}
		if r.code != cli.ExitInvalid || !rule(0).MatchString(r.stderr) || !rule(1).MatchString(r.stderr) {
			t.Fatalf("bad policy: exit %d, stderr %q; want exit %d naming both rules", r.code, r.stderr, cli.ExitInvalid)
		}
		good := write("policy.yaml", `
typeInstance:
  rules:
    - typeRef: {path: cap.type.aws.*}
      backend: {id: files, description: example file backend}
    - typeRef: {path: "cap.*"}
      backend: {id: cairn-builtin}
`)
		if out := e.ok("policy", "apply", "-f", good); !strings.Contains(out, "policy applied: version 1, 2 typeInstance rules") {
			t.Errorf("policy apply: %q", out)
		}
		// What get prints applies back (kubectl's get -o yaml | apply -f -),
		// and an apply of the stored policy is no new version.
		for _, format := range []string{"yaml", "json"} {
			printed := e.ok("policy", "get", "-o", format)
			if out := e.ok("policy", "apply", "-f", write("printed."+format, printed)); !strings.Contains(out, "policy unchanged: version 1") {
				t.Errorf("policy apply of get -o %s: %q; want unchanged", format, out)
			}
			if r := e.run(printed, "policy", "apply", "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "policy unchanged: version 1") {
				t.Errorf("policy get -o %s | policy apply -f -: exit %d, %q %q; want unchanged", format, r.code, r.stdout, r.stderr)
			}
		}
		if out := e.ok("policy", "apply", "-f", good); !strings.Contains(out, "policy unchanged: version 1") {
			t.Errorf("policy apply of the same file: %q; want unchanged", out)
		}
		// The printed form's resourceVersion is the version it was read at:
		// a stale one is a conflict, and its unknown fields are named.
		stale := write("stale.yaml", "resourceVersion: 7\ncreatedBy: someone\npolicy:\n  typeInstance: {rules: []}\n")
		if r := e.run("", "policy", "apply", "-f", stale); r.code != cli.ExitConflict || !strings.Contains(r.stderr, "resourceVersion 7") || !strings.Contains(r.stderr, "now 1") {
			t.Errorf("policy apply of a stale printed policy: exit %d, stderr %q; want exit %d naming both versions", r.code, r.stderr, cli.ExitConflict)
		}
		extra := write("extra.yaml", "resourceVersion: 1\nkind: Policy\npolicy:\n  typeInstance: {rules: []}\n")
		if r := e.run("", "policy", "apply", "-f", extra); r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "kind is not a known field (known: resourceVersion, createdBy, policy)") {
			t.Errorf("policy apply with an unknown top-level field: exit %d, stderr %q", r.code, r.stderr)
		}
		// A file of two documents (the second, say, meant to replace the
		// first) is refused whole rather than read as its first: nothing
		// changes, and the error names the file. So is an empty one, which
		// would remove every rule.
		two := write("two.yaml", "typeInstance: {rules: []}\n---\ntypeInstance: {rules: []}\n")
		empty := write("empty.yaml", "# nothing yet\n")
		for _, f := range []string{two, empty} {
			r := e.run("", "policy", "apply", "-f", f)
			if r.code != cli.ExitInvalid || !strings.Contains(r.stderr, filepath.Base(f)) && !strings.Contains(r.stderr, "empty") {
				t.Errorf("policy apply -f %s: exit %d, stderr %q; want exit %d naming the file", filepath.Base(f), r.code, r.stderr, cli.ExitInvalid)
			}
		}
		if out := e.ok("policy", "get"); !strings.Contains(out, "Policy version 1") {
			t.Errorf("a refused file changed the policy: %q", out)
		}
		if out := e.ok("policy", "get"); !strings.Contains(out, "cap.type.aws.*") || !strings.Contains(out, files.ID) {
			t.Errorf("policy get: %q", out)
		}
		if out := e.ok("policy", "explain", "cap.type.aws.auth.credentials:0.1.0"); !strings.Contains(out, "rule 0 (typeRef cap.type.aws.*)") || !strings.Contains(out, "files ("+files.ID+")") {
			t.Errorf("policy explain aws: %q", out)
		}
		if out := e.ok("policy", "explain", "cap.type.gcp.sa"); !strings.Contains(out, "catch-all") || !strings.Contains(out, cairn.BuiltinBackendID) {
			t.Errorf("policy explain gcp: %q", out)
		}
		if r := e.run("", "policy", "explain", "NOT A PATH"); r.code != cli.ExitInvalid {
			t.Errorf("explain of a bad path: exit %d", r.code)
		}

		e.ok("apply", "-f", write("instances.yaml", `
apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: aws-creds}
spec:
  typeRef: {path: cap.type.aws.auth.credentials, revision: 0.1.0}
  value: {accessKey: AKIA, secretKey: s3cr3t}
---
apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: gcp-sa}
spec:
  typeRef: {path: cap.type.gcp.sa, revision: 0.1.0}
  value: {email: sa@example.com}
`))
		for path, want := range map[string]string{"cap.type.aws.auth.credentials": files.ID, "cap.type.gcp.sa": cairn.BuiltinBackendID} {
			list, err := e.hub().ListInstances(context.Background(), store.InstanceFilter{TypePath: path}, false)
			if err != nil || len(list) != 1 || list[0].Backend.ID != want {
				t.Fatalf("%s: %+v, %v; want one instance in backend %s", path, list, err, want)
			}
			if want == files.ID {
				if _, err := os.Stat(filepath.Join(values, list[0].ID, "1.json")); err != nil {
					t.Errorf("the file backend has no value file for %s: %v", list[0].ID, err)
				}
			}
		}
		if vs, err := e.hub().ResourceVersions(context.Background(), hub.PolicyID, false); err != nil || len(vs) != 1 {
			t.Errorf("policy history: %d versions, %v", len(vs), err)
		}

		// The policy is not a TypeInstance to write: a generic write would
		// store a rule naming a missing backend, unvalidated.
		badValue := write("bad.json", `{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"00000000-0000-4000-8000-000000000000"}}]}}`)
		before := e.ok("policy", "get", "-o", "json")
		for _, args := range [][]string{
			{"update", hub.PolicyID, "--value-file", badValue},
			{"delete", "ti", hub.PolicyID},
			{"lock", hub.PolicyID, "--owner", "me"},
			{"unlock", hub.PolicyID, "--owner", "me"},
		} {
			r := e.run("", args...)
			if r.code != cli.ExitForbidden || !strings.Contains(r.stderr, "holds the hub's policy: change it with 'cairn policy apply -f FILE'") {
				t.Errorf("cairn %s: exit %d, stderr %q; want the policy's refusal", strings.Join(args, " "), r.code, r.stderr)
			}
			if after := e.ok("policy", "get", "-o", "json"); after != before {
				t.Errorf("cairn %s changed the policy:\n%s\nwant\n%s", strings.Join(args, " "), after, before)
			}
		}
	})
}

func TestBackendGotemplateCommand(t *testing.T) {
	e := newEnv(t)
	if out := e.ok("backend", "gotemplate", "--print-context-schema"); !strings.Contains(out, "relatedTypeInstanceAlias") {
		t.Errorf("--print-context-schema: %q", out)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"backend", "gotemplate"}, "needs --server"},
		{[]string{"backend", "gotemplate", "--server", "http://127.0.0.1:1", "--listen", "nope"}, "--listen"},
	}
	for _, tt := range tests {
		if r := e.run("", tt.args...); r.code != cli.ExitInvalid || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("cairn %s: exit %d stderr %q, want %d and %q", strings.Join(tt.args, " "), r.code, r.stderr, cli.ExitInvalid, tt.want)
		}
	}
}
