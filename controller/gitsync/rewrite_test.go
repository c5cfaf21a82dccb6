package gitsync_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// TestForcePushWithoutCairnsCommits: someone rewrites the branch keeping
// only the first of three Flags cairn made: kept's file is squashed into a
// commit of hers, dropped's file is gone. A process on a fresh cache (a
// restart, another replica) finds no commit recording either. kept reads
// from what the hub knows (its file at the tip), and a sync imports
// nothing; dropped cannot be read, and says why and what to do, but a
// table of Flags still lists every Flag (dropped's value unknown, with the
// reason) rather than failing; an update of dropped puts its file back.
func TestForcePushWithoutCairnsCommits(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	e.create("first", true)
	base := gittest.Git(t, e.remote.Path, "rev-parse", "main")
	e.create("kept", true)
	droppedID := e.create("dropped", false)
	e.person("status") // clones
	e.person("reset", "--quiet", "--hard", base)
	e.person("checkout", "--quiet", "origin/main", "--", "default/flipt.io-v1-Flag-kept.json")
	e.person("commit", "--quiet", "-m", "squash kept")
	e.person("push", "--quiet", "--force", "origin", "main")

	e.open(t.TempDir()) // a fresh cache
	if inst, err := e.get("kept"); err != nil || string(inst.Latest.Value) != `{"enabled":true}` {
		t.Errorf("kept on a fresh cache: %+v, %v; want its file at the tip", inst.Latest, err)
	}
	_, err := e.get("dropped")
	if !cairn.HasCode(err, cairn.CodeNotFound) || !strings.Contains(err.Error(), "the branch was rewritten without it") {
		t.Errorf("dropped on a fresh cache: %v; want NotFound saying the rewrite dropped it", err)
	}
	var unknown []string
	list, _, err := e.h.ListInstancesWith(ctx, store.InstanceFilter{TypePath: flagType}, hub.ListOptions{Values: true,
		Unreadable: func(inst cairn.Instance, err error) { unknown = append(unknown, inst.Name+": "+err.Error()) }})
	if err != nil || len(list) != 3 {
		t.Fatalf("list of Flags = %d, %v; want the 3", len(list), err)
	}
	if len(unknown) != 1 || !strings.HasPrefix(unknown[0], "dropped: ") || !strings.Contains(unknown[0], "rewritten without it") {
		t.Errorf("unreadable = %q, want dropped, saying why", unknown)
	}
	if res, err := e.syncer().Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
		t.Errorf("Sync after the force-push = %+v, %v; want nothing to import", res, err)
	}
	if _, err := e.h.UpdateInstances(cairn.WithActor(ctx, "admin"), []hub.UpdateInstance{{ID: droppedID, Value: []byte(`{"enabled":true}`)}}); err != nil {
		t.Fatalf("update dropped: %v", err)
	}
	e.open(t.TempDir())
	if inst, err := e.get("dropped"); err != nil || inst.Latest.ResourceVersion != 2 || string(inst.Latest.Value) != `{"enabled":true}` {
		t.Errorf("dropped after its update, on a fresh cache: %+v, %v", inst.Latest, err)
	}
}
