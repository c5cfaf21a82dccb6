package gitsync_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/cairn-dev/cairn/backend/scm/scmtest"
)

const ghToken = "gh-test-token"

// seedMain gives the bare repository a main branch with one commit, as a
// repository a pull request can target.
func (r *remote) seedMain(t testing.TB) string {
	t.Helper()
	work := t.TempDir()
	gitCmd(t, "", "clone", "--quiet", r.fileURL(), work)
	gitCmd(t, work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial")
	gitCmd(t, work, "push", "--quiet", "origin", "HEAD:main")
	return gitCmd(t, r.path, "rev-parse", "main")
}

// fastForward is the fake GitHub's merge: main moves to the pull
// request's head, refused unless that is a fast-forward.
func (r *remote) fastForward(p scmtest.Pull) error {
	if err := exec.Command("git", "-C", r.path, "merge-base", "--is-ancestor", p.Base, p.Head).Run(); err != nil {
		return fmt.Errorf("%s is not a fast-forward of %s", p.Head, p.Base)
	}
	out, err := exec.Command("git", "-C", r.path, "update-ref", "refs/heads/"+p.Base, "refs/heads/"+p.Head).CombinedOutput()
	if err != nil {
		return fmt.Errorf("update-ref: %v: %s", err, out)
	}
	return nil
}
