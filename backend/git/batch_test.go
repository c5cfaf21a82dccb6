package git_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
)

func metaOf(name string) *cairn.ResourceMeta {
	m := flagMeta(name, nil)
	return &m
}

// TestBatchIsOneCommitAndUndoIsAnother: a batch creating one resource,
// updating one and deleting one is one commit changing the three files,
// its message listing each change; undoing it is one more commit that puts
// the tree back exactly as before, and a second process (another cache)
// reads the index the same way as the writer: the created resource is
// unknown, the updated one is back at its previous version, the deleted one
// is back.
func TestBatchIsOneCommitAndUndoIsAnother(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := cairn.WithActor(t.Context(), "stack-controller")
	upID, delID, newID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	upCtx := create(t, ctx, b, upID, "kept", `{"enabled":false}`)
	delCtx := create(t, ctx, b, delID, "gone", `{"enabled":true}`)
	before := r.Commits(t)
	treeBefore := gittest.Git(t, r.Path, "rev-parse", "main^{tree}")

	writes := []cairn.BatchWrite{
		{Meta: metaOf("fresh"), Create: &cairn.OnCreateRequest{InstanceID: newID, Value: json.RawMessage(`{"enabled":true}`)}},
		{Meta: metaOf("kept"), Update: &cairn.OnUpdateRequest{InstanceID: upID, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: upCtx}},
		{Meta: metaOf("gone"), Delete: &cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx}},
	}
	res, err := b.OnBatch(ctx, writes)
	if err != nil {
		t.Fatalf("OnBatch: %v", err)
	}
	if n := r.Commits(t); n != before+1 {
		t.Fatalf("the batch made %d commits, want 1", n-before)
	}
	head := gittest.Git(t, r.Path, "rev-parse", "main")
	if res.Token != head {
		t.Errorf("token %q, want the commit %s", res.Token, head)
	}
	if stat := gittest.Git(t, r.Path, "show", "--no-renames", "--name-status", "--format=", "main"); !strings.Contains(stat, "A\t"+flagPath("fresh")) ||
		!strings.Contains(stat, "M\t"+flagPath("kept")) || !strings.Contains(stat, "D\t"+flagPath("gone")) {
		t.Errorf("the batch commit changes:\n%s", stat)
	}
	msg := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main")
	for _, s := range []string{"cairn: create 1, update 1, delete 1 resources by stack-controller",
		"- create Flag production/fresh (resource version 1)", "- update Flag production/kept (resource version 2)", "- delete Flag production/gone",
		"Cairn-Change: create " + newID + " 1 flipt.io/v1 Flag production/fresh", "Cairn-Change: update " + upID + " 2 flipt.io/v1 Flag production/kept",
		"Cairn-Change: delete " + delID + " 0 flipt.io/v1 Flag production/gone", "Cairn-Actor: stack-controller"} {
		if !strings.Contains(msg, s) {
			t.Errorf("batch commit message lacks %q:\n%s", s, msg)
		}
	}
	var vc struct{ Commit string }
	for i, c := range res.Contexts[:2] {
		if err := json.Unmarshal(c, &vc); err != nil || vc.Commit != head {
			t.Errorf("context %d = %s, want the batch commit", i, c)
		}
	}

	if err := b.UndoBatch(ctx, writes, res); err != nil {
		t.Fatalf("UndoBatch: %v", err)
	}
	if n := r.Commits(t); n != before+2 {
		t.Fatalf("batch and undo made %d commits, want 2", n-before)
	}
	if tree := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"); tree != treeBefore {
		t.Errorf("after the undo the tree is %s, want the tree before the batch %s:\n%s", tree, treeBefore, gittest.Git(t, r.Path, "ls-tree", "-r", "main"))
	}
	undo := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main")
	for _, s := range []string{"cairn: undo " + head[:12], "Cairn-Revert: " + head, "- undo delete Flag production/gone"} {
		if !strings.Contains(undo, s) {
			t.Errorf("undo commit message lacks %q:\n%s", s, undo)
		}
	}

	other := gittest.NewBackend(t, r.FileURL())
	for name, bk := range map[string]*git.Backend{"writer": b, "other cache": other} {
		if _, err := bk.GetValue(ctx, cairn.GetValueRequest{InstanceID: newID, ResourceVersion: 1, Context: res.Contexts[0]}); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("%s: the undone create still reads: %v", name, err)
		}
		if v, err := bk.GetValue(ctx, cairn.GetValueRequest{InstanceID: upID, ResourceVersion: 1, Context: upCtx}); err != nil || string(v) != `{"enabled":false}` {
			t.Errorf("%s: version 1 of the updated resource = %s, %v", name, v, err)
		}
		if v, err := bk.GetValue(ctx, cairn.GetValueRequest{InstanceID: delID, ResourceVersion: 1, Context: delCtx}); err != nil || string(v) != `{"enabled":true}` {
			t.Errorf("%s: the restored resource = %s, %v", name, v, err)
		}
	}
	// The backend writes on from the restored state: version 2 of the
	// updated resource is free again, the restored one can be deleted.
	if _, err := other.OnUpdate(cairn.WithResourceMeta(ctx, *metaOf("kept")), cairn.OnUpdateRequest{InstanceID: upID, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: upCtx}); err != nil {
		t.Errorf("update after the undo: %v", err)
	}
	if err := other.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx}); err != nil {
		t.Errorf("delete of the restored resource: %v", err)
	}
}

// TestBatchCheckFailureCommitsNothing: a batch whose last write is refused
// (a create of an id that exists) commits none of its writes.
func TestBatchCheckFailureCommitsNothing(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	id := uuid.NewString()
	c1 := create(t, ctx, b, id, "a", `{"enabled":false}`)
	before := r.Commits(t)
	_, err := b.OnBatch(ctx, []cairn.BatchWrite{
		{Meta: metaOf("a"), Update: &cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: c1}},
		{Meta: metaOf("b"), Create: &cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{}`)}},
	})
	if !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		t.Fatalf("OnBatch = %v, want AlreadyExists", err)
	}
	if n := r.Commits(t); n != before {
		t.Errorf("a refused batch made %d commits", n-before)
	}
	if got := gittest.SpecOf(t, r.Show(t, "", flagPath("a"))); !strings.Contains(string(got), "false") {
		t.Errorf("the refused update reached the file: %s", got)
	}
}

// TestProposeBatchIsOnePullRequest: in propose mode a batch is one branch
// with one commit and one pull request (checked by the fake GitHub against
// its REST API); the next batch, while it is open, is stacked on it; an
// undo closes the pull request and deletes its branch.
func TestProposeBatchIsOnePullRequest(t *testing.T) {
	r := gittest.NewRemote(t)
	mainBefore := r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	b := proposeBackend(t, r.Serve(t), gh.URL)
	ctx := cairn.WithActor(t.Context(), "stack-controller")
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	var writes []cairn.BatchWrite
	for i, n := range []string{"a", "b", "c"} {
		writes = append(writes, cairn.BatchWrite{Meta: metaOf(n), Create: &cairn.OnCreateRequest{InstanceID: ids[i], Value: json.RawMessage(`{"enabled":true}`)}})
	}
	res, err := b.OnBatch(ctx, writes)
	if err != nil {
		t.Fatalf("OnBatch: %v", err)
	}
	if n := gh.Count("POST /repos/acme/flags/pulls"); n != 1 {
		t.Fatalf("%d pull requests opened for one batch, want 1", n)
	}
	p := git.ProposalOf(res.Contexts[0])
	if p == nil || p.Number != 1 {
		t.Fatalf("context %s carries no proposal", res.Contexts[0])
	}
	for i, c := range res.Contexts {
		if q := git.ProposalOf(c); q == nil || *q != *p {
			t.Errorf("write %d: proposal %+v, want the batch's %+v", i, q, p)
		}
	}
	if got := gittest.Git(t, r.Path, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved; a proposal must leave it alone")
	}
	if n := gittest.Git(t, r.Path, "rev-list", "--count", mainBefore+".."+p.Branch); n != "1" {
		t.Errorf("the proposal branch has %s commits over main, want 1", n)
	}
	pull := mustPull(t, gh, 1)
	if pull.Title != "cairn: create 3 resources by stack-controller" || !strings.Contains(pull.Body, "Cairn-Change: create "+ids[2]) {
		t.Errorf("pull request = %+v", pull)
	}

	// The next batch follows versions in the open pull request: one more
	// pull request, stacked on the first.
	next := []cairn.BatchWrite{
		{Meta: metaOf("a"), Update: &cairn.OnUpdateRequest{InstanceID: ids[0], NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":false}`), Context: res.Contexts[0]}},
		{Meta: metaOf("c"), Delete: &cairn.OnDeleteRequest{InstanceID: ids[2], Context: res.Contexts[2]}},
	}
	res2, err := b.OnBatch(ctx, next)
	if err != nil {
		t.Fatalf("second OnBatch: %v", err)
	}
	if n := gh.Count("POST /repos/acme/flags/pulls"); n != 2 {
		t.Fatalf("%d pull requests after two batches, want 2", n)
	}
	p2 := git.ProposalOf(res2.Contexts[0])
	if p2 == nil || p2.Number != 2 {
		t.Fatalf("second context %s", res2.Contexts[0])
	}
	if n := gittest.Git(t, r.Path, "rev-list", "--count", p.Branch+".."+p2.Branch); n != "1" {
		t.Errorf("the second proposal is %s commits over the first, want 1 (stacked)", n)
	}
	files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", p2.Branch)
	if !strings.Contains(files, flagPath("a")) || !strings.Contains(files, flagPath("b")) || strings.Contains(files, flagPath("c")) {
		t.Errorf("files of the second proposal:\n%s", files)
	}

	// Undoing the second batch closes its pull request and deletes its
	// branch; the first stays open.
	if err := b.UndoBatch(ctx, next, res2); err != nil {
		t.Fatalf("UndoBatch: %v", err)
	}
	if pr := mustPull(t, gh, 2); pr.State != "closed" {
		t.Errorf("pull request 2 is %s after the undo, want closed", pr.State)
	}
	if pr := mustPull(t, gh, 1); pr.State != "open" {
		t.Errorf("pull request 1 is %s, want open", pr.State)
	}
	if out := gittest.Git(t, r.Path, "branch", "--list", p2.Branch); out != "" {
		t.Errorf("branch %s is left after the undo", p2.Branch)
	}
}

// TestRestoreDeletedNeedsTheVersionsCommit: a context without the commit of
// the deleted version is refused by name, and nothing is committed.
func TestRestoreDeletedNeedsTheVersionsCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	before := r.Commits(t)
	err := b.RestoreDeleted(t.Context(), cairn.OnDeleteRequest{InstanceID: "inst-1",
		Context: json.RawMessage(`{"apiVersion":"flipt.io/v1","kind":"Flag","namespace":"default","name":"x","resourceVersion":1}`)})
	if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), `"inst-1"`) || !strings.Contains(err.Error(), "no commit") {
		t.Fatalf("RestoreDeleted without a commit = %v, want Invalid naming the instance", err)
	}
	if n := r.Commits(t); n != before {
		t.Fatalf("%d commits after a refused restore, want %d", n, before)
	}
}

// TestRecoverBatchUndoesALockedInstancesWrite: an update of a locked Flag
// by its lock's owner, pushed but never committed by the hub (the hub
// gives its owner with the undo, as with OnDeleteRevision). Recovery's
// batch call must take it back as the single undo does, not refuse it as
// locked by that owner, or the intent is retried for ever.
func TestRecoverBatchUndoesALockedInstancesWrite(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	id := uuid.NewString()
	c1 := create(t, ctx, b, id, "locked", `{"enabled":false}`)
	if err := b.OnLock(ctx, cairn.OnLockRequest{InstanceID: id, LockedBy: "ci"}); err != nil {
		t.Fatal(err)
	}
	c2, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: c1, OwnerID: "ci"})
	if err != nil {
		t.Fatalf("OnUpdate by the lock's owner: %v", err)
	}
	if err := b.RecoverBatch(ctx, []cairn.RecoveryWrite{{UndoUpdate: &cairn.OnDeleteRevisionRequest{InstanceID: id, ResourceVersion: 2, Context: c2, OwnerID: "ci"}}}); err != nil {
		t.Fatalf("RecoverBatch of the owner's update: %v", err)
	}
	if got := gittest.SpecOf(t, r.Show(t, "", flagPath("locked"))); !strings.Contains(string(got), "false") {
		t.Errorf("file after recovery has spec %s, want version 1's (enabled false)", got)
	}
}

// TestUndoOfAChangedFileIsRecorded: an update the hub never committed is
// taken back after someone changed its file on the branch (her change
// stays). The undo must still be recorded on the branch: another process,
// or this one restarted, otherwise still holds the undone resource version
// and refuses the hub's next update of the instance ("already has resource
// version 2") for ever. For a single undo and for recovery's undo of a
// batch.
func TestUndoOfAChangedFileIsRecorded(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batch"}[batch], func(t *testing.T) {
			r := gittest.NewRemote(t)
			b := gittest.NewBackend(t, r.FileURL())
			ctx := t.Context()
			names := []string{"f", "g"}
			ids := map[string]string{}
			ctxs := map[string]json.RawMessage{}
			var writes []cairn.BatchWrite
			for _, n := range names {
				ids[n] = uuid.NewString()
				ctxs[n] = create(t, ctx, b, ids[n], n, `{"enabled":false}`)
				writes = append(writes, cairn.BatchWrite{Meta: metaOf(n), Update: &cairn.OnUpdateRequest{InstanceID: ids[n], NewResourceVersion: 2,
					NewValue: json.RawMessage(`{"enabled":true}`), Context: ctxs[n]}})
			}
			if batch {
				if _, err := b.OnBatch(ctx, writes); err != nil {
					t.Fatal(err)
				}
			} else {
				names = names[:1]
				if _, err := b.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("f", nil)), *writes[0].Update); err != nil {
					t.Fatal(err)
				}
			}
			work := filepath.Join(t.TempDir(), "work")
			gittest.Git(t, "", "clone", "--quiet", "--branch", "main", r.FileURL(), work)
			for _, n := range names {
				doc := `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"namespace":"production","name":"` + n + `"},"spec":{"enabled":"hers"}}`
				if err := os.WriteFile(filepath.Join(work, flagPath(n)), []byte(doc), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gittest.Git(t, work, "-c", "user.name=Jane", "-c", "user.email=jane@example.com", "commit", "--quiet", "-am", "hers")
			gittest.Git(t, work, "push", "--quiet", "origin", "main")
			var rws []cairn.RecoveryWrite
			for _, n := range names {
				rws = append(rws, cairn.RecoveryWrite{UndoUpdate: &cairn.OnDeleteRevisionRequest{InstanceID: ids[n], ResourceVersion: 2, Context: ctxs[n]}})
			}
			if err := b.RecoverBatch(ctx, rws); err != nil {
				t.Fatalf("RecoverBatch: %v", err)
			}
			fresh := gittest.NewBackend(t, r.FileURL())
			for _, n := range names {
				if !strings.Contains(r.Show(t, "", flagPath(n)), "hers") {
					t.Errorf("%s: the undo overwrote her change", n)
				}
				if _, err := fresh.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta(n, nil)), cairn.OnUpdateRequest{InstanceID: ids[n], NewResourceVersion: 2,
					NewValue: json.RawMessage(`{"enabled":false}`), Context: ctxs[n]}); err != nil {
					t.Errorf("%s: another process's update to resource version 2 after its undo: %v", n, err)
				}
			}
		})
	}
}
