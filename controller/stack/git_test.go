package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const ghToken = "gh-stack-token"

// gitEnv is env whose Flags are stored in a Git backend on a bare
// repository (real git), in commit mode, or in propose mode against a
// fake GitHub that checks every request against GitHub's REST API.
type gitEnv struct {
	*env
	bare string
	gh   *scmtest.GitHub
}

// noAudit is a stack author's ChildResourcePatcher: spec.audit false
// leaves the audit-log Flag out.
var noAudit = stack.ChildResourcePatcherFunc(func(_ context.Context, in stack.Installation, rs []stack.Resource) ([]stack.Resource, error) {
	if in.Spec["audit"] != false {
		return rs, nil
	}
	out := rs[:0]
	for _, r := range rs {
		if r.Kind() != "Flag" || !strings.HasSuffix(r.Name(), "-audit-log") {
			out = append(out, r)
		}
	}
	return out, nil
})

func newGitEnv(t *testing.T, propose bool) *gitEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	bare := filepath.Join(dir, "flags.git")
	gittest.Git(t, "", "init", "--bare", "--quiet", "--initial-branch=main", bare)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opener := gitbackend.NewOpener(gitbackend.OpenerConfig{CacheDir: filepath.Join(dir, "cache"),
		Getenv: func(k string) string {
			if k == "GH_TOKEN" {
				return ghToken
			}
			return ""
		}})
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: opener})
	if err != nil {
		t.Fatal(err)
	}
	e := &gitEnv{env: &env{t: t, ctx: cairn.WithActor(ctx, "tester"), h: h,
		c: stackctl.New(stackctl.Config{Hub: h, Identity: "test-controller", Renderer: stack.Renderer{ChildPatchers: []stack.ChildResourcePatcher{noAudit}}})},
		bare: bare}
	if _, err := h.CreateType(e.ctx, cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1alpha1",
		Names:      &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"enabled":{"type":"boolean"},"description":{"type":"string"}}}`)}); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
		"author": map[string]string{"name": "cairn", "email": "cairn@example.com"}}
	if propose {
		// A pull request needs a branch to merge into.
		work := t.TempDir()
		gittest.Git(t, "", "clone", "--quiet", "file://"+bare, work)
		gittest.Git(t, "", "-C", work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial")
		gittest.Git(t, "", "-C", work, "push", "--quiet", "origin", "HEAD:main")
		e.gh = scmtest.NewGitHub(t, "acme/flags", ghToken, nil)
		cfg["mode"] = "propose"
		cfg["scm"] = map[string]any{"provider": "github", "apiURL": e.gh.URL, "repository": "acme/flags", "tokenEnv": "GH_TOKEN"}
	}
	value, _ := json.Marshal(cfg)
	reg, err := h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "flags-repo", Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: gitbackend.TypePath, Revision: cairn.CoreRevision}, Value: value,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatalf("register the Git backend: %v", err)
	}
	if _, err := h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "io.flipt.flag"}, Backend: policy.BackendRef{ID: reg[0].ID}}}}}); err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	return e
}

func (e *gitEnv) commits() int {
	e.t.Helper()
	out, err := exec.Command("git", "-C", e.bare, "rev-list", "--count", "main").Output()
	if err != nil {
		return 0 // no branch yet
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// changes is the last commit's file changes, one "<status> <path>" each.
func (e *gitEnv) changes() string {
	e.t.Helper()
	return gittest.Git(e.t, "", "-C", e.bare, "show", "--no-renames", "--name-status", "--format=", "main")
}

func (e *gitEnv) setSpec(id, spec string) {
	e.t.Helper()
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(spec)}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *gitEnv) wantSynced(id string) {
	e.t.Helper()
	if c := cond(e.status(id), "Synced"); c.Status != "True" {
		e.t.Fatalf("Synced = %+v", c)
	}
}

func flagFile(inst, flag string) string {
	return "default/flipt.io-v1alpha1-Flag-" + inst + "-" + flag + ".json"
}

// TestStackInGitOneCommitPerReconcile: every reconcile of an installation
// whose children are in a Git backend is exactly one commit, whatever mix
// of creates, updates and deletes it makes, and a reconcile with nothing
// to change makes none; the deletion is one commit (the stack declares no
// deletion priorities: one band).
func TestStackInGitOneCommitPerReconcile(t *testing.T) {
	e := newGitEnv(t, false)
	entry := e.addStack(filepath.Join("testdata", "flagset"))
	inst := e.install(entry, "moon", nil, `{"team":"moonshots"}`)

	e.reconcile(inst.ID)
	e.wantSynced(inst.ID)
	if n := e.commits(); n != 1 {
		t.Fatalf("the install made %d commits, want 1", n)
	}
	ch := e.changes()
	for _, f := range []string{"new-project", "dark-mode", "audit-log"} {
		if !strings.Contains(ch, "A\t"+flagFile("moon", f)) {
			t.Errorf("the install commit does not add %s:\n%s", f, ch)
		}
	}
	msg := gittest.Git(t, "", "-C", e.bare, "log", "-1", "--format=%B", "main")
	if !strings.HasPrefix(msg, "cairn: create 3 resources by test-controller") || strings.Count(msg, "Cairn-Change: create ") != 3 || !strings.Contains(msg, "Cairn-Actor: test-controller") {
		t.Errorf("install commit message:\n%s", msg)
	}

	// One parameter change updates two children and deletes the third:
	// one commit.
	e.setSpec(inst.ID, `{"team":"stars","audit":false}`)
	e.reconcile(inst.ID)
	e.wantSynced(inst.ID)
	if n := e.commits(); n != 2 {
		t.Fatalf("the change made %d commits, want 1", n-1)
	}
	ch = e.changes()
	if !strings.Contains(ch, "M\t"+flagFile("moon", "new-project")) || !strings.Contains(ch, "M\t"+flagFile("moon", "dark-mode")) ||
		!strings.Contains(ch, "D\t"+flagFile("moon", "audit-log")) {
		t.Errorf("the change's commit:\n%s", ch)
	}
	if msg := gittest.Git(t, "", "-C", e.bare, "log", "-1", "--format=%s", "main"); msg != "cairn: update 2, delete 1 resources by test-controller" {
		t.Errorf("the change's commit message: %q", msg)
	}
	if got := gittest.Git(t, "", "-C", e.bare, "show", "main:"+flagFile("moon", "dark-mode")); !strings.Contains(got, "stars") {
		t.Errorf("dark-mode after the change:\n%s", got)
	}
	if kids := e.children(inst); len(kids) != 2 {
		t.Errorf("%d children after the change, want 2", len(kids))
	}

	// The next updates two and creates one: one commit.
	e.setSpec(inst.ID, `{"team":"suns","audit":true}`)
	e.reconcile(inst.ID)
	e.wantSynced(inst.ID)
	if n := e.commits(); n != 3 {
		t.Fatalf("the second change made %d commits, want 1", n-2)
	}
	ch = e.changes()
	if !strings.Contains(ch, "M\t"+flagFile("moon", "new-project")) || !strings.Contains(ch, "A\t"+flagFile("moon", "audit-log")) {
		t.Errorf("the second change's commit:\n%s", ch)
	}

	// Nothing to change: no commit.
	e.reconcile(inst.ID)
	if n := e.commits(); n != 3 {
		t.Errorf("a reconcile with nothing to change made %d commits", n-3)
	}

	// The deletion: one commit removing every child, then the
	// installation goes.
	if err := e.h.DeleteInstance(e.ctx, inst.ID, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := e.h.GetInstance(e.ctx, inst.ID, false); cairn.HasCode(err, cairn.CodeNotFound) {
			break
		}
		e.reconcile(inst.ID)
	}
	if _, err := e.h.GetInstance(e.ctx, inst.ID, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("the installation is still there: %v", err)
	}
	if n := e.commits(); n != 4 {
		t.Fatalf("the deletion made %d commits, want 1", n-3)
	}
	if files := gittest.Git(t, "", "-C", e.bare, "ls-tree", "-r", "--name-only", "main"); files != "" {
		t.Errorf("files left after the deletion:\n%s", files)
	}
}

// TestApplyChildrenFailingHalfwayLeavesNothing: a reconcile's changes whose
// Git commit is made but whose store transaction then fails (a new child
// takes a name an instance in another backend has) are taken back: one
// more commit restores the tree exactly, the hub's children are as before,
// and the next reconcile has nothing to do.
func TestApplyChildrenFailingHalfwayLeavesNothing(t *testing.T) {
	e := newGitEnv(t, false)
	entry := e.addStack(filepath.Join("testdata", "flagset"))
	inst := e.install(entry, "moon", nil, `{"team":"moonshots"}`)
	e.reconcile(inst.ID)
	tree := gittest.Git(t, "", "-C", e.bare, "rev-parse", "main^{tree}")
	before := e.commits()
	kids := e.children(inst)
	if len(kids) != 3 {
		t.Fatalf("%d children, want 3", len(kids))
	}
	byName := map[string]cairn.Instance{}
	for _, k := range kids {
		byName[k.Name] = k
	}
	// A Flag in the built-in backend, named as the new child will be.
	flag := cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "moon-extra", TypeRef: flag,
		Value: json.RawMessage(`{"enabled":true}`), Backend: &hub.BackendInput{ID: cairn.BuiltinBackendID}}}}); err != nil {
		t.Fatal(err)
	}
	up, gone := byName["moon-dark-mode"], byName["moon-audit-log"]
	_, err := e.h.ApplyChildren(e.ctx, inst.ID, hub.ChildChanges{
		Create: []hub.NewInstance{{Name: "moon-extra", TypeRef: flag, Value: json.RawMessage(`{"enabled":false}`),
			Labels: map[string]string{hub.LabelInstallationUID: inst.ID}}},
		Update: []hub.UpdateInstance{{ID: up.ID, Value: json.RawMessage(`{"enabled":true,"description":"changed"}`)}},
		Delete: []string{gone.ID},
	})
	if !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		t.Fatalf("ApplyChildren = %v, want AlreadyExists from the store", err)
	}
	if n := e.commits(); n != before+2 {
		t.Fatalf("%d commits, want 2 (the batch and its undo)", n-before)
	}
	if got := gittest.Git(t, "", "-C", e.bare, "rev-parse", "main^{tree}"); got != tree {
		t.Errorf("the tree after the undo differs from before:\n%s", gittest.Git(t, "", "-C", e.bare, "diff", "--stat", "main~2", "main"))
	}
	if msg := gittest.Git(t, "", "-C", e.bare, "log", "-1", "--format=%B", "main"); !strings.Contains(msg, "Cairn-Revert: "+gittest.Git(t, "", "-C", e.bare, "rev-parse", "main~1")) {
		t.Errorf("the last commit is not the undo of the batch:\n%s", msg)
	}
	after := e.children(inst)
	if len(after) != 3 {
		t.Fatalf("%d children after the failed apply, want the 3 from before", len(after))
	}
	for _, k := range after {
		b := byName[k.Name]
		if k.Latest.ResourceVersion != b.Latest.ResourceVersion || !cairn.JSONEqual(k.Latest.Value, b.Latest.Value) {
			t.Errorf("%s: rv %d %s, want rv %d %s", k.Name, k.Latest.ResourceVersion, k.Latest.Value, b.Latest.ResourceVersion, b.Latest.Value)
		}
	}
	// The backend writes on: a reconcile changes nothing, the next change
	// is one commit again.
	e.reconcile(inst.ID)
	if n := e.commits(); n != before+2 {
		t.Errorf("a reconcile after the undo made %d commits", n-before-2)
	}
	e.setSpec(inst.ID, `{"team":"stars","audit":false}`)
	e.reconcile(inst.ID)
	e.wantSynced(inst.ID)
	if n := e.commits(); n != before+3 {
		t.Errorf("the change after the undo made %d commits, want 1", n-before-2)
	}
}

// TestStackInGitProposeOnePullRequestPerReconcile: in propose mode every
// reconcile with changes opens exactly one pull request (one branch, one
// commit), each stacked on the previous one while that is open; main is
// left alone.
func TestStackInGitProposeOnePullRequestPerReconcile(t *testing.T) {
	e := newGitEnv(t, true)
	mainBefore := gittest.Git(t, "", "-C", e.bare, "rev-parse", "main")
	entry := e.addStack(filepath.Join("testdata", "flagset"))
	inst := e.install(entry, "moon", nil, `{"team":"moonshots"}`)
	pulls := func() int { return e.gh.Count("POST /repos/acme/flags/pulls") }

	steps := []struct {
		spec  string
		title string
		files []string // the proposal's files besides those of the previous one
	}{
		{"", "cairn: create 3 resources by test-controller", []string{"A\t" + flagFile("moon", "audit-log")}},
		{`{"team":"stars","audit":false}`, "cairn: update 2, delete 1 resources by test-controller", []string{"M\t" + flagFile("moon", "dark-mode"), "D\t" + flagFile("moon", "audit-log")}},
		{`{"team":"suns","audit":true}`, "cairn: create 1, update 2 resources by test-controller", []string{"A\t" + flagFile("moon", "audit-log")}},
	}
	prevHead := mainBefore
	for i, s := range steps {
		if s.spec != "" {
			e.setSpec(inst.ID, s.spec)
		}
		e.reconcile(inst.ID)
		e.wantSynced(inst.ID)
		if n := pulls(); n != i+1 {
			t.Fatalf("step %d: %d pull requests, want %d (one per reconcile)", i, n, i+1)
		}
		pr, ok := e.gh.Pull(i + 1)
		if !ok || pr.State != "open" || pr.Base != "main" || pr.Title != s.title {
			t.Fatalf("step %d: pull request %+v", i, pr)
		}
		head := gittest.Git(t, "", "-C", e.bare, "rev-parse", "refs/heads/"+pr.Head)
		if n := gittest.Git(t, "", "-C", e.bare, "rev-list", "--count", prevHead+".."+head); n != "1" {
			t.Errorf("step %d: the proposal is %s commits over the previous one, want 1 (stacked)", i, n)
		}
		diff := gittest.Git(t, "", "-C", e.bare, "diff", "--no-renames", "--name-status", prevHead, head)
		for _, f := range s.files {
			if !strings.Contains(diff, f) {
				t.Errorf("step %d: the proposal lacks %q:\n%s", i, f, diff)
			}
		}
		prevHead = head
	}
	if got := gittest.Git(t, "", "-C", e.bare, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved in propose mode")
	}
	// Nothing to change: no pull request.
	e.reconcile(inst.ID)
	if n := pulls(); n != len(steps) {
		t.Errorf("a reconcile with nothing to change opened a pull request (%d)", n)
	}
	if t.Failed() {
		fmt.Println(gittest.Git(t, "", "-C", e.bare, "log", "--all", "--format=%h %s"))
	}
}

// TestApplyChildrenFailingHalfwayProposeClosesThePullRequest: in propose
// mode a reconcile's pull request whose store transaction then fails is
// closed again and its branch deleted; the hub is unchanged.
func TestApplyChildrenFailingHalfwayProposeClosesThePullRequest(t *testing.T) {
	e := newGitEnv(t, true)
	entry := e.addStack(filepath.Join("testdata", "flagset"))
	inst := e.install(entry, "moon", nil, `{"team":"moonshots"}`)
	e.reconcile(inst.ID)
	kids := e.children(inst)
	if len(kids) != 3 || e.gh.Count("POST /repos/acme/flags/pulls") != 1 {
		t.Fatalf("%d children, %d pull requests after the install", len(kids), e.gh.Count("POST /repos/acme/flags/pulls"))
	}
	flag := cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "moon-extra", TypeRef: flag,
		Value: json.RawMessage(`{"enabled":true}`), Backend: &hub.BackendInput{ID: cairn.BuiltinBackendID}}}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.h.ApplyChildren(e.ctx, inst.ID, hub.ChildChanges{
		Create: []hub.NewInstance{{Name: "moon-extra", TypeRef: flag, Value: json.RawMessage(`{"enabled":false}`)}},
		Update: []hub.UpdateInstance{{ID: kids[0].ID, Value: json.RawMessage(`{"enabled":true,"description":"changed"}`)}},
	})
	if !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		t.Fatalf("ApplyChildren = %v, want AlreadyExists from the store", err)
	}
	if n := e.gh.Count("POST /repos/acme/flags/pulls"); n != 2 {
		t.Fatalf("%d pull requests, want 2 (the install's and the failed apply's)", n)
	}
	pr, _ := e.gh.Pull(2)
	if pr.State != "closed" || pr.Merged {
		t.Errorf("the failed apply's pull request = %+v, want closed unmerged", pr)
	}
	if out := gittest.Git(t, "", "-C", e.bare, "branch", "--list", pr.Head); out != "" {
		t.Errorf("branch %s left after the undo", pr.Head)
	}
	if first, _ := e.gh.Pull(1); first.State != "open" {
		t.Errorf("the install's pull request is %s, want open", first.State)
	}
	after := e.children(inst)
	if len(after) != 3 {
		t.Fatalf("%d children after the failed apply, want 3", len(after))
	}
	for _, k := range after {
		if k.Latest.ResourceVersion != 1 {
			t.Errorf("%s has resource version %d after the failed apply, want 1", k.Name, k.Latest.ResourceVersion)
		}
	}
}

// TestStatusWithholdsBackendWords: an installation's status is read by
// whoever may get the installation, most of whom may not get its children's
// backend; a reconcile the backend fails reports the failure there without
// the backend's words (a Git server's refusal, the repository url), with a
// reference the server logs them under.
func TestStatusWithholdsBackendWords(t *testing.T) {
	e := newGitEnv(t, false)
	entry := e.addStack(filepath.Join("testdata", "flagset"))
	inst := e.install(entry, "moon", nil, `{"team":"moonshots"}`)
	e.reconcile(inst.ID)
	e.wantSynced(inst.ID)
	// Children name their backend by id, as the children themselves do:
	// its alias is for those who may get it.
	for _, r := range e.status(inst.ID).Resources {
		if r.Backend == "flags-repo" || r.Backend == "" {
			t.Errorf("child %s: backend %q, want the backend's id", r.Name, r.Backend)
		}
	}
	hook := filepath.Join(e.bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'GL-HOOK-ERR: tenant-b quota' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.setSpec(inst.ID, `{"team":"stars"}`)
	_, _ = e.c.Reconcile(e.ctx, inst.ID) // retried later: the backend failed
	st := e.status(inst.ID)
	c := cond(st, "Synced")
	if c.Status != "False" {
		t.Fatalf("Synced = %+v, want False", c)
	}
	var texts []string
	texts = append(texts, c.Message)
	for _, ev := range st.Events {
		texts = append(texts, ev.Message)
	}
	for _, text := range texts {
		if strings.Contains(text, "GL-HOOK-ERR") || strings.Contains(text, e.bare) {
			t.Errorf("the status shows the backend's words or url: %s", text)
		}
	}
	t.Logf("Synced: %s", c.Message)
	if !strings.Contains(c.Message, "reference ") {
		t.Errorf("Synced message %q gives no reference", c.Message)
	}
}
