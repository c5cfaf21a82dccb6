package hub_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
)

// batchHook wraps a backend that takes batches and calls after once a
// batch is stored, so a test can change the hub between the backend's
// write and the store transaction.
type batchHook struct {
	cairn.Backend
	mu    sync.Mutex
	after func()
}

func (b *batchHook) OnBatch(ctx context.Context, ws []cairn.BatchWrite) (cairn.BatchResult, error) {
	res, err := b.Backend.(cairn.BatchWriter).OnBatch(ctx, ws)
	b.mu.Lock()
	fn := b.after
	b.after = nil
	b.mu.Unlock()
	if err == nil && fn != nil {
		fn()
	}
	return res, err
}

func (b *batchHook) NamesResources() bool {
	n, ok := b.Backend.(cairn.ResourceNamer)
	return ok && n.NamesResources()
}

func (b *batchHook) UndoBatch(ctx context.Context, ws []cairn.BatchWrite, res cairn.BatchResult) error {
	return b.Backend.(cairn.BatchWriter).UndoBatch(ctx, ws, res)
}

type hookOpener struct {
	inner *gitbackend.Opener
	mu    sync.Mutex
	hooks map[string]*batchHook
}

func (o *hookOpener) OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	b, err := o.inner.OpenBackend(ctx, sb)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hooks[sb.ID] == nil {
		o.hooks[sb.ID] = &batchHook{Backend: b}
	}
	o.hooks[sb.ID].Backend = b
	return o.hooks[sb.ID], nil
}

// Outputs kept in a Git backend (commit mode, real git): each state write
// is one commit, its creates, updates and deletes together; a write the
// store refuses after the commit is taken back by the backend's undo.
func TestTerraformOutputsInGit(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "outputs.git")
	gittest.Git(t, "", "init", "--bare", "--quiet", "--initial-branch=main", bare)
	op := &hookOpener{inner: gitbackend.NewOpener(gitbackend.OpenerConfig{CacheDir: filepath.Join(dir, "cache")}), hooks: map[string]*batchHook{}}
	e := newEnv(t, func(c *hub.Config) { c.Backends = op })
	if err := e.h.RegisterTerraformTypes(e.ctx); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
		"author": map[string]string{"name": "cairn", "email": "cairn@example.com"}})
	reg, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "outputs-repo", Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: gitbackend.TypePath, Revision: cairn.CoreRevision}, Value: cfg,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatal(err)
	}
	repo := reg[0].ID
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: hub.TerraformOutputPath}, Backend: policy.BackendRef{ID: repo}}}}}); err != nil {
		t.Fatal(err)
	}
	commits := func() int {
		out, err := exec.Command("git", "-C", bare, "rev-list", "--count", "main").Output()
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	tree := func() string { return gittest.Git(t, "", "-C", bare, "ls-tree", "-r", "main") }

	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L", 1, map[string]string{"a": `"a1"`, "b": `"b1"`, "c": `"c1"`})); err != nil {
		t.Fatal(err)
	}
	if n := commits(); n != 1 {
		t.Fatalf("the first write made %d commits, want 1", n)
	}
	before, beforeTree := e.tfSnapshot("s"), tree()

	// The store refuses after the commit: another client locks the state
	// while the backend commits.
	v2 := tfDoc("L", 2, map[string]string{"a": `"a2"`, "c": `"c1"`, "d": `"d2"`})
	op.mu.Lock()
	op.hooks[repo].after = func() {
		if err := e.h.LockInstances(e.ctx, []string{"terraformstate.default.s"}, "someone"); err != nil {
			t.Errorf("lock the state: %v", err)
		}
	}
	op.mu.Unlock()
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", v2); !cairn.HasCode(err, cairn.CodeLocked) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("write refused by the store: %v", err)
	}
	if err := e.h.UnlockInstances(e.ctx, []string{"terraformstate.default.s"}, "someone"); err != nil {
		t.Fatal(err)
	}
	if got := e.tfSnapshot("s"); got != before {
		t.Errorf("the refused write changed the hub:\nbefore %s\nafter  %s", before, got)
	}
	if got := tree(); got != beforeTree {
		t.Errorf("the refused write's commit was not taken back:\nbefore %s\nafter  %s", beforeTree, got)
	}
	if n := commits(); n != 3 {
		t.Errorf("%d commits, want 3: the first write, the refused one and its undo", n)
	}

	// The same write goes through as one commit: a changed, b deleted, d added.
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", v2); err != nil {
		t.Fatal(err)
	}
	if n := commits(); n != 4 {
		t.Errorf("%d commits after the write, want 4", n)
	}
	changes := gittest.Git(t, "", "-C", bare, "show", "--no-renames", "--name-status", "--format=", "main")
	want := "M\tdefault/terraform.cairn.dev-v1-TerraformOutput-s-a.json\n" +
		"D\tdefault/terraform.cairn.dev-v1-TerraformOutput-s-b.json\n" +
		"A\tdefault/terraform.cairn.dev-v1-TerraformOutput-s-d.json"
	if changes != want {
		t.Errorf("the write's commit changes\n%s\nwant\n%s", changes, want)
	}
	if got := keys(e.outputs("s")); got != "s-a,s-c,s-d" {
		t.Errorf("outputs: %s", got)
	}
}
