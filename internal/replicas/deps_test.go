package replicas

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/controller/install"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestSharedDependencyRace: two installs of team-portal for the same team,
// sent at once to two `cairn serve` replicas on one PostgreSQL, need the
// same shared flags-env installation. It is created once (the database's
// uniqueness decides the race; the loser uses the winner's) and both
// portals use it.
func TestSharedDependencyRace(t *testing.T) {
	pgtest.DSN(t)
	bin := cairnBinary(t)
	db := newDatabase(t)
	a := startReplica(t, bin, db, "a", "--stack-lease-duration", "3s")
	b := startReplica(t, bin, db, "b", "--stack-lease-duration", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, d := range []string{"flags-env", "team-portal"} {
		s, err := stack.Load(ctx, filepath.Join(moduleRoot(t), "examples", "stacks", d))
		if err != nil {
			t.Fatal(err)
		}
		archive, err := s.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.client.AddStack(ctx, archive); err != nil {
			t.Fatal(err)
		}
	}

	type outcome struct {
		res *deps.Result
		err error
	}
	results := make([]outcome, 2)
	var wg sync.WaitGroup
	for i, c := range []*client.Client{a.client, b.client} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, res, err := c.Install(ctx, install.Request{Namespace: "default", Name: []string{"p1", "p2"}[i], Stack: "team-portal",
				Parameters: map[string]any{"team": "web"}}, nil)
			results[i] = outcome{res, err}
		}()
	}
	wg.Wait()
	var created, reused []string
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("install %d: %v\nlogs a:\n%s\nlogs b:\n%s", i, r.err, a.logs.String(), b.logs.String())
		}
		for _, k := range r.res.Installed {
			if strings.Contains(k, "flags-env-") {
				created = append(created, k)
			}
		}
		for _, k := range r.res.Reused {
			if strings.Contains(k, "flags-env-") {
				reused = append(reused, k)
			}
		}
	}
	if len(created) != 1 || len(reused) != 1 || created[0] != reused[0] {
		t.Fatalf("flags created by %v and reused by %v: want created once and reused once", created, reused)
	}
	// Both portals use the one flags installation.
	res, err := a.client.FindResource(ctx, "flagsenvs")
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.client.List(ctx, res, "default", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("%d flagsenvs, want 1", len(l.Items))
	}
}
