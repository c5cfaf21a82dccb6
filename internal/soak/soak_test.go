package soak_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/soak"
	"github.com/cairn-dev/cairn/internal/testbin"
)

// TestShortSoak runs the soak for a few seconds against a real cairn serve
// and expects every invariant to hold and every kind of operation to have
// run; scripts/soak runs the same for longer.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a server")
	}
	dir := t.TempDir()
	bin := testbin.Cairn(t)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	srv, err := soak.StartServer(t.Context(), bin, filepath.Join(dir, "data"), "", logf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := soak.Run(t.Context(), soak.Config{Server: srv.URL, Duration: 4 * time.Second, Writers: 2, Readers: 1, Watchers: 2, Pool: 5, Sample: 500 * time.Millisecond,
		GitInterval: 50 * time.Millisecond, GitPool: 2, GitDir: filepath.Join(dir, "git")})
	if stopErr := srv.Stop(15 * time.Second); stopErr != nil {
		t.Error(stopErr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Print(&b)
	t.Log(b.String())
	if len(rep.Violations) > 0 {
		t.Fatalf("violations:\n%s", b.String())
	}
	for _, op := range []string{"create", "update", "delete", "lock", "unlock", "update-locked", "list", "graphql-list", "get",
		"git-create", "git-update", "git-create-taken", "git-lock", "git-update-locked", "git-unlock", "git-delete"} {
		if rep.Ops[op] == 0 {
			t.Errorf("no %s ran:\n%s", op, b.String())
		}
	}
	// The Git check ran: the repository holds a file for each live
	// instance (all of them may have been deleted by the end).
	if rep.Git == nil || rep.Git.Instances < 3 || rep.Git.Files != rep.Git.Live {
		t.Errorf("git check: %+v", rep.Git)
	}
	if len(rep.Samples) < 4 {
		t.Errorf("%d samples in 4s at 500ms", len(rep.Samples))
	}
	png := filepath.Join(dir, "soak.png")
	if err := rep.Plot(png); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("plot: %v, not a PNG", err)
	}
}
