package git_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// TestRewrittenHistory: someone rewrites the branch (an interactive rebase
// dropping cairn's commit that created y, keeping its update; a reset
// squashing z's into one of her own) and force-pushes. A process that rebuilds
// its index from the new branch (a restart, a new cache) must still read
// and update y, whose update commit and trailers survived; before, it
// answered NotFound, which made every list of its Type fail and left the
// instance neither readable, updatable nor deletable through REST. z, which
// no commit records any more, is NotFound, with an error saying why.
func TestRewrittenHistory(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := cairn.WithActor(t.Context(), "jane")
	x, y, z, w := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	create(t, ctx, b, x, "x", `{"enabled":true}`)
	var logs bytes.Buffer
	cfg, err := git.ParseConfig([]byte(`{"url":"` + r.FileURL() + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	syncer, err := git.New(git.Options{Config: cfg, CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	base := gittest.Git(t, r.Path, "rev-parse", "main")
	y1 := create(t, ctx, b, y, "y", `{"enabled":false}`)
	y2, err := b.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("y", nil)),
		cairn.OnUpdateRequest{InstanceID: y, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: y1})
	if err != nil {
		t.Fatalf("OnUpdate y: %v", err)
	}
	update := gittest.Git(t, r.Path, "rev-parse", "main")
	z1 := create(t, ctx, b, z, "z", `{"enabled":true}`)
	w1 := create(t, ctx, b, w, "w", `{"enabled":true}`)
	if _, _, tip, err := syncer.Pending(ctx); err != nil || syncer.SetSynced(tip) != nil {
		t.Fatalf("Pending: %v", err)
	}

	// The rewrite: main is x's commit, then y's update commit replayed
	// (same message, so same trailers, and the file it left); z's file in a
	// commit of hers, without trailers; w dropped with its file.
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, "", "clone", "--quiet", "--branch", "main", r.FileURL(), work)
	gittest.Git(t, work, "reset", "--quiet", "--hard", base)
	gittest.Git(t, work, "checkout", "--quiet", update, "--", flagPath("y"))
	gittest.Git(t, work, "-c", "user.name=Jane Doe", "-c", "user.email=jane@example.com", "commit", "--quiet", "-C", update)
	gittest.Git(t, work, "checkout", "--quiet", "origin/main", "--", flagPath("z"))
	gittest.Git(t, work, "-c", "user.name=Jane Doe", "-c", "user.email=jane@example.com", "commit", "--quiet", "-m", "squash: z")
	gittest.Git(t, work, "push", "--quiet", "--force", "origin", "main")

	// A cache that had synced the old branch says it was rewritten.
	if _, from, _, err := syncer.Pending(ctx); err != nil || !strings.Contains(logs.String(), "branch rewritten") || !strings.Contains(logs.String(), from.String()) {
		t.Errorf("Pending after the force-push: %v; log %q, want a warning that the branch was rewritten, naming %s", err, logs.String(), from)
	}

	fresh := gittest.NewBackend(t, r.FileURL())
	got, err := fresh.GetValue(ctx, cairn.GetValueRequest{InstanceID: y, ResourceVersion: 2, Context: y2})
	if err != nil || string(got) != `{"enabled":true}` {
		t.Errorf("fresh cache: GetValue(y, 2) = %s, %v; want {\"enabled\":true}", got, err)
	}
	if _, err := fresh.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("y", nil)),
		cairn.OnUpdateRequest{InstanceID: y, NewResourceVersion: 3, NewValue: json.RawMessage(`{"enabled":false}`), Context: y2}); err != nil {
		t.Errorf("fresh cache: OnUpdate(y, 3): %v", err)
	}
	// z, which no commit records any more, reads from what the hub knows
	// (its context): its file at the tip.
	if got, err := fresh.GetValue(ctx, cairn.GetValueRequest{InstanceID: z, ResourceVersion: 1, Context: z1}); err != nil || string(got) != `{"enabled":true}` {
		t.Errorf("fresh cache: GetValue(z, 1) = %s, %v; want its file at the tip", got, err)
	}
	// w's file went with the rewrite: NotFound, saying what happened and
	// what to do; an update puts it back, recorded again.
	if _, err := fresh.GetValue(ctx, cairn.GetValueRequest{InstanceID: w, ResourceVersion: 1, Context: w1}); !cairn.HasCode(err, cairn.CodeNotFound) ||
		!strings.Contains(err.Error(), "the branch was rewritten without it") || !strings.Contains(err.Error(), flagPath("w")) {
		t.Errorf("fresh cache: GetValue(w, 1) = %v, want NotFound saying the rewrite dropped %s", err, flagPath("w"))
	}
	if _, err := fresh.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("w", nil)),
		cairn.OnUpdateRequest{InstanceID: w, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":false}`), Context: w1}); err != nil {
		t.Errorf("fresh cache: OnUpdate(w, 2): %v", err)
	}
	// Another process reads the same: y at version 3, w at 2, x untouched.
	other := gittest.NewBackend(t, r.FileURL())
	if got, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: y, ResourceVersion: 3}); err != nil || string(got) != `{"enabled":false}` {
		t.Errorf("other cache: GetValue(y, 3) = %s, %v", got, err)
	}
	if got, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: w, ResourceVersion: 2}); err != nil || string(got) != `{"enabled":false}` {
		t.Errorf("other cache: GetValue(w, 2) = %s, %v", got, err)
	}
	if _, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: x, ResourceVersion: 1}); err != nil {
		t.Errorf("other cache: GetValue(x, 1): %v", err)
	}
	// Without its context (nothing the hub knows), z is NotFound.
	if _, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: z, ResourceVersion: 1}); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("other cache: GetValue(z, 1) = %v, want NotFound", err)
	}
	// The hub's delete of z removes its file, so no sync imports it again.
	if err := fresh.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: z, Context: z1}); err != nil {
		t.Errorf("fresh cache: OnDelete(z): %v", err)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); strings.Contains(files, flagPath("z")) {
		t.Errorf("files on main after z's delete:\n%s", files)
	}
}

// TestRecoverBatchDeletesAnUnrecordedInstancesFile: the hub deleted z, but
// the process died before its Git commit, and a force-push then squashed
// z's commit into one of someone else's. Recovery (RecoverBatch, as
// hub.Recover calls it) must remove z's file as OnDelete does, or the next
// sync imports it again as a new instance.
func TestRecoverBatchDeletesAnUnrecordedInstancesFile(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := cairn.WithActor(t.Context(), "jane")
	x, z := uuid.NewString(), uuid.NewString()
	create(t, ctx, b, x, "x", `{"enabled":true}`)
	base := gittest.Git(t, r.Path, "rev-parse", "main")
	z1 := create(t, ctx, b, z, "z", `{"enabled":true}`)
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, "", "clone", "--quiet", "--branch", "main", r.FileURL(), work)
	gittest.Git(t, work, "reset", "--quiet", "--hard", base)
	gittest.Git(t, work, "checkout", "--quiet", "origin/main", "--", flagPath("z"))
	gittest.Git(t, work, "-c", "user.name=Jane Doe", "-c", "user.email=jane@example.com", "commit", "--quiet", "-m", "squash: z")
	gittest.Git(t, work, "push", "--quiet", "--force", "origin", "main")

	fresh := gittest.NewBackend(t, r.FileURL())
	if err := fresh.RecoverBatch(ctx, []cairn.RecoveryWrite{{Delete: &cairn.OnDeleteRequest{InstanceID: z, Context: z1}}}); err != nil {
		t.Fatalf("RecoverBatch of z's delete: %v", err)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); strings.Contains(files, flagPath("z")) {
		t.Errorf("files on main after recovery finished z's delete:\n%s", files)
	}
}
