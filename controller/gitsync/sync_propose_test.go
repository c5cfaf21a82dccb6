package gitsync_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
	"github.com/cairn-dev/cairn/hub"
)

const ghToken = "gh-test-token"

// TestSyncInProposeMode: in propose mode a change pushed to the branch is
// imported as in commit mode, opening no pull request; a proposal of
// cairn's, once merged, is not imported again (the hub holds its value).
func TestSyncInProposeMode(t *testing.T) {
	r := gittest.NewRemote(t)
	r.SeedMain(t)
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, r.FastForward)
	e := newSyncEnvWith(t, r, map[string]any{"mode": "propose",
		"scm": map[string]any{"provider": "github", "apiURL": gh.URL, "repository": "acme/flags", "tokenEnv": "GH_TOKEN"}},
		func(k string) string {
			if k == "GH_TOKEN" {
				return ghToken
			}
			return ""
		})
	ctx := context.Background()
	s := e.syncer()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	const opens = "POST /repos/acme/flags/pulls"

	e.person("status")
	e.write("pushed", flagFile("pushed", true))
	e.pushAll("add pushed")
	res, err := s.Sync(ctx)
	if err != nil || res.Created != 1 {
		t.Fatalf("Sync = %+v, %v; want one creation", res, err)
	}
	if n := gh.Count(opens); n != 0 {
		t.Errorf("the import opened %d pull requests", n)
	}
	inst, err := e.get("pushed")
	if err != nil || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` || git.ProposalOf(inst.Latest.Context) != nil {
		t.Fatalf("pushed: by %q, value %s, context %s, %v; want Jane's Flag, not a proposal", inst.Latest.CreatedBy, inst.Latest.Value, inst.Latest.Context, err)
	}

	// cairn's own change is a proposal; merged upstream, sync leaves it be.
	up, err := e.h.UpdateInstances(cairn.WithActor(ctx, "admin"), []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"enabled":false}`)}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	p := git.ProposalOf(up[0].Latest.Context)
	if p == nil || gh.Count(opens) != 1 {
		t.Fatalf("the update made no proposal: context %s, %d pull requests", up[0].Latest.Context, gh.Count(opens))
	}
	pull, ok := gh.Pull(p.Number)
	if !ok {
		t.Fatalf("no pull request %d", p.Number)
	}
	if err := r.FastForward(pull); err != nil {
		t.Fatalf("merge: %v", err)
	}
	res, err = s.Sync(ctx)
	if err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
		t.Errorf("Sync after the merge = %+v, %v; want nothing (cairn's own change)", res, err)
	}
	if inst, err := e.get("pushed"); err != nil || inst.Latest.ResourceVersion != 2 || string(inst.Latest.Value) != `{"enabled":false}` {
		t.Errorf("pushed after the merge: version %d, value %s, %v; want version 2, disabled", inst.Latest.ResourceVersion, inst.Latest.Value, err)
	}
}
