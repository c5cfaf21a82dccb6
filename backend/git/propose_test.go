package git_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
)

const ghToken = "gh-test-token"

func proposeBackend(t testing.TB, url, apiURL string) *git.Backend {
	t.Helper()
	return gittest.Open(t, url, map[string]any{"mode": "propose",
		"scm": map[string]any{"provider": "github", "apiURL": apiURL, "repository": "acme/flags", "tokenEnv": "GH_TOKEN"}},
		func(k string) string {
			if k == "GH_TOKEN" {
				return ghToken
			}
			return ""
		})
}

func TestProposeConfig(t *testing.T) {
	for _, v := range []string{
		`{"url":"file:///x","mode":"propose"}`,
		`{"url":"file:///x","mode":"propose","scm":{"provider":"bitbucket","repository":"a/b"}}`,
		`{"url":"file:///x","mode":"propose","scm":{"provider":"gitea","repository":"a/b"}}`,
	} {
		if _, err := git.ParseConfig(json.RawMessage(v)); !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("ParseConfig(%s) = %v, want Invalid", v, err)
		}
	}
	cfg, err := git.ParseConfig(json.RawMessage(`{"url":"file:///x","mode":"propose","scm":{"provider":"github","repository":"a/b","tokenEnv":"UNSET_TOKEN"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = git.New(git.Options{Config: cfg, CacheDir: t.TempDir(), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "UNSET_TOKEN") {
		t.Errorf("New without the token = %v, want an error naming the variable", err)
	}
}

func TestProposeOpensPullRequests(t *testing.T) {
	r := gittest.NewRemote(t)
	mainBefore := r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	b := proposeBackend(t, r.Serve(t), gh.URL)
	ctx := cairn.WithActor(t.Context(), "jane")
	id := uuid.NewString()

	out := create(t, ctx, b, id, "new-project", `{"enabled":true}`)
	p := git.ProposalOf(out)
	if p == nil || p.Provider != "github" || p.Number != 1 || !strings.HasPrefix(p.Branch, git.ProposalBranchPrefix) || p.URL == "" || p.Base != "main" {
		t.Fatalf("context %s: proposal = %+v", out, p)
	}
	if got := gittest.Git(t, r.Path, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s; a proposal must leave it alone", got)
	}
	var vc struct {
		Commit          string `json:"commit"`
		ResourceVersion int    `json:"resourceVersion"`
	}
	_ = json.Unmarshal(out, &vc)
	if got := gittest.Git(t, r.Path, "rev-parse", "refs/heads/"+p.Branch); got != vc.Commit {
		t.Errorf("branch %s is at %s, the context says %s", p.Branch, got, vc.Commit)
	}
	if got := gittest.SpecOf(t, r.Show(t, p.Branch, flagPath("new-project"))); !strings.Contains(string(got), `"enabled": true`) {
		t.Errorf("file on the proposal branch: spec %s", got)
	}
	pull, _ := gh.Pull(1)
	if pull.Head != p.Branch || pull.Base != "main" || pull.Title != "cairn: create Flag production/new-project (resource version 1) by jane" ||
		!strings.Contains(pull.Body, "Cairn-Instance: "+id) {
		t.Errorf("pull request = %+v", pull)
	}

	// The version's value is the proposal's file, also for another
	// process, which has to fetch the proposal branch.
	other := proposeBackend(t, r.FileURL(), gh.URL)
	for _, bk := range []*git.Backend{b, other} {
		v, err := bk.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1, Context: out})
		if err != nil || string(v) != `{"enabled":true}` {
			t.Errorf("GetValue of the proposed version = %s, %v", v, err)
		}
	}

	// An update while the creation is open stacks on it.
	out2, err := b.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("new-project", nil)),
		cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":false}`), Context: out})
	if err != nil {
		t.Fatalf("OnUpdate: %v", err)
	}
	p2 := git.ProposalOf(out2)
	if p2 == nil || p2.ID == p.ID || p2.Number != 2 {
		t.Fatalf("second proposal = %+v", p2)
	}
	if parent := gittest.Git(t, r.Path, "rev-parse", "refs/heads/"+p2.Branch+"^"); parent != vc.Commit {
		t.Errorf("the update's commit has parent %s, want the open proposal's %s", parent, vc.Commit)
	}

	// Merging the newer one brings both commits to main.
	if err := r.FastForward(mustPull(t, gh, 2)); err != nil {
		t.Fatal(err)
	}
	if got := gittest.SpecOf(t, r.Show(t, "main", flagPath("new-project"))); !strings.Contains(string(got), `"enabled": false`) {
		t.Errorf("main after the merge: spec %s", got)
	}
	// Once merged, the instance is known from main's trailers: a third
	// write starts at main's tip and is not stacked.
	out3, err := b.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("new-project", nil)),
		cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 3, NewValue: json.RawMessage(`{"enabled":true}`), Context: out2})
	if err != nil {
		t.Fatalf("third OnUpdate: %v", err)
	}
	p3 := git.ProposalOf(out3)
	if p3 == nil {
		t.Fatalf("third write: no proposal in %s", out3)
	}
	if parent, mainNow := gittest.Git(t, r.Path, "rev-parse", "refs/heads/"+p3.Branch+"^"), gittest.Git(t, r.Path, "rev-parse", "main"); parent != mainNow {
		t.Errorf("third proposal's parent %s, want main %s", parent, mainNow)
	}
	// The hub rolling that version back closes its pull request.
	if err := b.OnDeleteRevision(ctx, cairn.OnDeleteRevisionRequest{InstanceID: id, ResourceVersion: 3, Context: out3}); err != nil {
		t.Fatalf("OnDeleteRevision: %v", err)
	}
	if pull, _ := gh.Pull(p3.Number); pull.State != "closed" || pull.Merged {
		t.Errorf("rolled-back proposal = %+v, want closed unmerged", pull)
	}
}

func mustPull(t *testing.T, gh *scmtest.GitHub, n int) scmtest.Pull {
	t.Helper()
	p, ok := gh.Pull(n)
	if !ok {
		t.Fatalf("no pull request %d", n)
	}
	return p
}

// A proposal whose pull request cannot be opened leaves no branch.
func TestProposeWithoutPullRequestLeavesNoBranch(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/other", ghToken, nil) // a repository the backend does not name: 404
	b := proposeBackend(t, r.FileURL(), gh.URL)
	_, err := b.OnCreate(cairn.WithResourceMeta(t.Context(), flagMeta("x", nil)), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{}`)})
	if !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("OnCreate = %v, want the provider's NotFound", err)
	}
	if refs := gittest.Git(t, r.Path, "for-each-ref", "--format=%(refname)", "refs/heads/cairn/"); refs != "" {
		t.Errorf("branches left: %s", refs)
	}
}

// Deletes in propose mode: an instance whose creation is still a proposal
// has that pull request closed; one on the branch gets a pull request
// removing its file, and the branch keeps the file until it is merged.
func TestProposeDelete(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	b := proposeBackend(t, r.FileURL(), gh.URL)
	ctx := cairn.WithActor(t.Context(), "jane")

	pending := uuid.NewString()
	out := create(t, ctx, b, pending, "pending", `{"enabled":true}`)
	if err := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: pending, Context: out}); err != nil {
		t.Fatalf("OnDelete of a proposed creation: %v", err)
	}
	if pull := mustPull(t, gh, 1); pull.State != "closed" || pull.Merged {
		t.Errorf("the creation's pull request = %+v, want closed", pull)
	}

	merged := uuid.NewString()
	out = create(t, ctx, b, merged, "merged", `{"enabled":true}`)
	if err := r.FastForward(mustPull(t, gh, 2)); err != nil {
		t.Fatal(err)
	}
	mainBefore := gittest.Git(t, r.Path, "rev-parse", "main")
	if err := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: merged, Context: out}); err != nil {
		t.Fatalf("OnDelete of a merged instance: %v", err)
	}
	pull := mustPull(t, gh, 3)
	if pull.State != "open" || pull.Title != "cairn: delete Flag production/merged by jane" {
		t.Errorf("deletion pull request = %+v", pull)
	}
	if got := gittest.Git(t, r.Path, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved on a proposed delete")
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "refs/heads/"+pull.Head); strings.Contains(files, flagPath("merged")) {
		t.Errorf("the deletion's branch still has the file:\n%s", files)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); !strings.Contains(files, flagPath("merged")) {
		t.Errorf("main lost the file before the merge:\n%s", files)
	}
}

// A pull request that could not be opened leaves no branch, on the remote
// or in the backend's clone, and the next write proposes as usual.
func TestProposeAfterAFailedPullRequest(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, nil)
	b := proposeBackend(t, r.FileURL(), gh.URL)
	ctx := cairn.WithActor(t.Context(), "jane")
	gh.FailOpens(1)
	if _, err := b.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("first", nil)), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("OnCreate succeeded with the pull request refused")
	}
	if refs := gittest.Git(t, r.Path, "for-each-ref", "--format=%(refname)", "refs/heads/cairn/"); refs != "" {
		t.Errorf("branches left on the remote: %s", refs)
	}
	if got := b.LocalBranches(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, git.ProposalBranchPrefix) }) {
		t.Errorf("branches left in the clone: %v", got)
	}
	out := create(t, ctx, b, uuid.NewString(), "second", `{"enabled":true}`)
	if p := git.ProposalOf(out); p == nil || mustPull(t, gh, p.Number).State != "open" {
		t.Fatalf("the next write's proposal = %+v", p)
	}
	if got := b.LocalBranches(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, git.ProposalBranchPrefix) }) {
		t.Errorf("a proposal's branch stayed in the clone after its push: %v", got)
	}
}

// TestRecoveryClosesOrphanProposals: a process that proposed a batch (a
// stack's create, update and delete in one pull request) and died before
// the hub's store committed it leaves the pull request open, and the
// journal's intents hold only the contexts sent, which name no proposal.
// Recovery's calls (hub.Recover: OnDelete and OnDeleteRevision as
// rollbacks, RestoreDeleted for the delete) find the proposal by its
// commit's trailers, close its pull request and delete its branch; the
// target branch keeps the deleted instance's file, and an unrelated open
// proposal is left alone.
func TestRecoveryClosesOrphanProposals(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	b := proposeBackend(t, r.FileURL(), gh.URL)
	ctx := cairn.WithActor(t.Context(), "stack-controller")
	upID, delID, newID, otherID := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	upCtx := create(t, ctx, b, upID, "kept", `{"enabled":false}`)
	if err := r.FastForward(mustPull(t, gh, 1)); err != nil {
		t.Fatal(err)
	}
	delCtx := create(t, ctx, b, delID, "gone", `{"enabled":true}`)
	if err := r.FastForward(mustPull(t, gh, 2)); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, b, otherID, "other", `{"enabled":true}`) // pull request 3, open, not the batch's
	mainBefore := gittest.Git(t, r.Path, "rev-parse", "main")

	writes := []cairn.BatchWrite{
		{Meta: metaOf("fresh"), Create: &cairn.OnCreateRequest{InstanceID: newID, Value: json.RawMessage(`{"enabled":true}`)}},
		{Meta: metaOf("kept"), Update: &cairn.OnUpdateRequest{InstanceID: upID, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: upCtx}},
		{Meta: metaOf("gone"), Delete: &cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx}},
	}
	res, err := b.OnBatch(ctx, writes)
	if err != nil {
		t.Fatalf("OnBatch: %v", err)
	}
	orphan := mustPull(t, gh, 4)
	if orphan.State != "open" || res.Token == "" {
		t.Fatalf("the batch's pull request = %+v (token %q)", orphan, res.Token)
	}

	// The process dies here. Recovery, in another process, with the
	// intents' contexts (those sent).
	rec := proposeBackend(t, r.FileURL(), gh.URL)
	rb := cairn.WithRollback(ctx)
	if err := rec.OnDelete(rb, cairn.OnDeleteRequest{InstanceID: newID}); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("recovery's OnDelete of the create: %v", err)
	}
	if p := mustPull(t, gh, 4); p.State != "closed" || p.Merged {
		t.Errorf("after recovery undid the create, the batch's pull request = %+v, want closed", p)
	}
	if refs := gittest.Git(t, r.Path, "for-each-ref", "--format=%(refname)", "refs/heads/"+orphan.Head); refs != "" {
		t.Errorf("the orphan's branch is still on the remote: %s", refs)
	}
	// The batch's other intents find nothing left, and succeed.
	if err := rec.OnDeleteRevision(rb, cairn.OnDeleteRevisionRequest{InstanceID: upID, ResourceVersion: 2, Context: upCtx}); err != nil {
		t.Errorf("recovery's OnDeleteRevision of the update: %v", err)
	}
	if err := rec.RestoreDeleted(cairn.WithResourceMeta(ctx, *metaOf("gone")), cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx}); err != nil {
		t.Errorf("recovery's RestoreDeleted of the delete: %v", err)
	}
	if p := mustPull(t, gh, 3); p.State != "open" {
		t.Errorf("an unrelated proposal = %+v, want open", p)
	}
	if got := gittest.Git(t, r.Path, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved during recovery")
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); !strings.Contains(files, flagPath("gone")) {
		t.Errorf("main lost the file of the instance whose delete never committed:\n%s", files)
	}

	// Each intent on its own closes the proposal too: a batch of one
	// delete, then one update, each recovered alone.
	for _, tc := range []struct {
		name    string
		write   cairn.BatchWrite
		recover func() error
	}{
		{"delete", cairn.BatchWrite{Meta: metaOf("gone"), Delete: &cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx}},
			func() error {
				return rec.RestoreDeleted(cairn.WithResourceMeta(ctx, *metaOf("gone")), cairn.OnDeleteRequest{InstanceID: delID, Context: delCtx})
			}},
		{"update", cairn.BatchWrite{Meta: metaOf("kept"), Update: &cairn.OnUpdateRequest{InstanceID: upID, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: upCtx}},
			func() error {
				return rec.OnDeleteRevision(rb, cairn.OnDeleteRevisionRequest{InstanceID: upID, ResourceVersion: 2, Context: upCtx})
			}},
	} {
		if _, err := b.OnBatch(ctx, []cairn.BatchWrite{tc.write}); err != nil {
			t.Fatalf("%s: OnBatch: %v", tc.name, err)
		}
		pulls := gh.Pulls()
		last := pulls[len(pulls)-1]
		if last.State != "open" {
			t.Fatalf("%s: its pull request = %+v", tc.name, last)
		}
		if err := tc.recover(); err != nil {
			t.Errorf("%s: recovery: %v", tc.name, err)
		}
		if p := mustPull(t, gh, last.Number); p.State != "closed" || p.Merged {
			t.Errorf("%s: after recovery its pull request = %+v, want closed", tc.name, p)
		}
	}
	if p := mustPull(t, gh, 3); p.State != "open" {
		t.Errorf("an unrelated proposal = %+v, want open", p)
	}
}

// TestRecoverBatchClosesOrphanProposals: what hub.Recover hands a Git
// backend in propose mode (one RecoverBatch call with the batch's undone
// create and update, the contexts sent) closes the orphan pull request as
// the single undos do; versions only a proposal holds are on no branch,
// and recovery must not count them taken back while their pull request
// stays open to be merged.
func TestRecoverBatchClosesOrphanProposals(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	b := proposeBackend(t, r.FileURL(), gh.URL)
	ctx := cairn.WithActor(t.Context(), "stack-controller")
	upID, newID := uuid.NewString(), uuid.NewString()
	upCtx := create(t, ctx, b, upID, "kept", `{"enabled":false}`)
	if err := r.FastForward(mustPull(t, gh, 1)); err != nil {
		t.Fatal(err)
	}
	writes := []cairn.BatchWrite{
		{Meta: metaOf("fresh"), Create: &cairn.OnCreateRequest{InstanceID: newID, Value: json.RawMessage(`{"enabled":true}`)}},
		{Meta: metaOf("kept"), Update: &cairn.OnUpdateRequest{InstanceID: upID, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: upCtx}},
	}
	if _, err := b.OnBatch(ctx, writes); err != nil {
		t.Fatalf("OnBatch: %v", err)
	}
	if p := mustPull(t, gh, 2); p.State != "open" {
		t.Fatalf("the batch's pull request = %+v", p)
	}
	rec := proposeBackend(t, r.FileURL(), gh.URL)
	if err := rec.RecoverBatch(ctx, []cairn.RecoveryWrite{
		{UndoCreate: &cairn.OnDeleteRequest{InstanceID: newID}},
		{UndoUpdate: &cairn.OnDeleteRevisionRequest{InstanceID: upID, ResourceVersion: 2, Context: upCtx}},
	}); err != nil {
		t.Fatalf("RecoverBatch: %v", err)
	}
	if p := mustPull(t, gh, 2); p.State != "closed" || p.Merged {
		t.Errorf("after recovery, the batch's pull request = %+v, want closed", p)
	}
}
