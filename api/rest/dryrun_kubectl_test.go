package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// newKubectlEnv is a restEnv with kubectlRD registered and the real
// kubectl pointed at it.
func newKubectlEnv(t *testing.T) (*restEnv, *kubectlRunner) {
	t.Helper()
	kubectl := findKubectl(t)
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", kubectlRD, http.StatusCreated)
	return e, newKubectl(t, kubectl, e.url)
}

// snapshot is everything a write could change, read from the hub: the
// change log's head, every instance with its value, the Types.
func (e *restEnv) snapshot() string {
	e.t.Helper()
	seq, err := e.h.LastSeq(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	insts, err := e.h.ListInstances(e.ctx, store.InstanceFilter{}, true)
	if err != nil {
		e.t.Fatal(err)
	}
	types, err := e.h.ListTypes(e.ctx, store.TypeFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal([]any{seq, insts, types})
	return string(b)
}

// TestKubectlDryRunChangesNothing runs every kubectl verb with
// --dry-run=server, and kubectl diff, and asserts the answer is the one
// the real write would give while the store is unchanged.
func TestKubectlDryRunChangesNothing(t *testing.T) {
	e, k := newKubectlEnv(t)
	k.file("one.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: one, labels: {team: a}}\nspec: {key: one, port: 8080}\n")
	k.ok("create", "-f", "one.yaml")
	k.file("new.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: new}\nspec: {key: new, port: 1}\n")
	k.file("changed.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: one, labels: {team: a}}\nspec: {key: one, port: 9090}\n")
	k.file("bad.yaml", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: bad}\nspec: {key: bad, port: 0}\n")

	for _, tt := range []struct {
		name string
		args []string
		out  string   // in stdout when the verb succeeds
		errs []string // in stderr when it must fail as the real write fails
	}{
		{"create", []string{"create", "--dry-run=server", "-f", "new.yaml"}, "flag.flipt.io/new created (server dry run)", nil},
		{"create an invalid object", []string{"create", "--dry-run=server", "-f", "bad.yaml"}, "", []string{`The Flag "bad" is invalid: spec.port`}},
		{"create what exists", []string{"create", "--dry-run=server", "-f", "one.yaml"}, "", []string{"AlreadyExists"}},
		{"apply a new object", []string{"apply", "--dry-run=server", "-f", "new.yaml"}, "flag.flipt.io/new created (server dry run)", nil},
		{"apply a change", []string{"apply", "--dry-run=server", "-f", "changed.yaml"}, "flag.flipt.io/one configured (server dry run)", nil},
		{"server-side apply", []string{"apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "changed.yaml"}, "flag.flipt.io/one serverside-applied (server dry run)", nil},
		{"replace", []string{"replace", "--dry-run=server", "-f", "changed.yaml"}, "flag.flipt.io/one replaced (server dry run)", nil},
		{"patch", []string{"patch", "flag", "one", "--dry-run=server", "--type", "merge", "-p", `{"spec":{"port":7}}`}, "flag.flipt.io/one patched", nil},
		{"patch invalid", []string{"patch", "flag", "one", "--dry-run=server", "--type", "merge", "-p", `{"spec":{"port":0}}`}, "", []string{"spec.port"}},
		{"label", []string{"label", "flag", "one", "--dry-run=server", "x=y"}, "flag.flipt.io/one labeled (server dry run)", nil},
		{"annotate", []string{"annotate", "flag", "one", "--dry-run=server", "x=y"}, "flag.flipt.io/one annotated (server dry run)", nil},
		{"delete", []string{"delete", "flag", "one", "--dry-run=server"}, `flag.flipt.io "one" deleted (server dry run)`, nil},
		{"delete what does not exist", []string{"delete", "flag", "nobody", "--dry-run=server"}, "", []string{"NotFound"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.with(t).snapshot()
			out, errOut, code := k.run(tt.args...)
			switch {
			case tt.errs == nil && code != 0:
				t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(tt.args, " "), code, out, errOut)
			case tt.errs == nil && !strings.Contains(out, tt.out):
				t.Errorf("kubectl %s = %q, want %q", strings.Join(tt.args, " "), out, tt.out)
			case tt.errs != nil && code == 0:
				t.Errorf("kubectl %s succeeded, want a failure: %s", strings.Join(tt.args, " "), out)
			}
			for _, w := range tt.errs {
				if !strings.Contains(errOut, w) {
					t.Errorf("kubectl %s: stderr %q lacks %q", strings.Join(tt.args, " "), errOut, w)
				}
			}
			if after := e.with(t).snapshot(); after != before {
				t.Errorf("kubectl %s changed the store", strings.Join(tt.args, " "))
			}
		})
	}

	// kubectl diff shows the change and makes none (exit 1: differences).
	before := e.snapshot()
	out, errOut, code := k.run("diff", "-f", "changed.yaml")
	if code != 1 || !strings.Contains(out, "-  port: 8080") || !strings.Contains(out, "+  port: 9090") {
		t.Errorf("kubectl diff: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := k.run("diff", "-f", "one.yaml"); code != 0 {
		t.Errorf("kubectl diff of the live object: exit %d, want 0 (no differences)\n%s%s", code, out, errOut)
	}
	if out, _, code := k.run("diff", "-f", "new.yaml"); code != 1 || !strings.Contains(out, "+  name: new") {
		t.Errorf("kubectl diff of a new object: exit %d\n%s", code, out)
	}
	if e.snapshot() != before {
		t.Error("kubectl diff changed the store")
	}
	if got := k.ok("get", "flag", "one", "-o", "jsonpath={.spec.port}"); got != "8080" {
		t.Errorf("port after the dry runs = %s, want 8080", got)
	}

	// A dryRun value other than All is refused, as the API server does.
	r := e.do("DELETE", flagPath("default", "one")+"?dryRun=Some", "", nil)
	wantStatus(t, r, http.StatusUnprocessableEntity, "Invalid", `dryRun: Unsupported value: "Some": supported values: "All"`)
}
