// Package gittest gives tests a real bare Git repository to push to, over
// file:// or smart HTTP (git http-backend), and the real git to look at
// what landed in it.
package gittest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
)

// Remote is a bare repository reachable over file:// and, once served,
// smart HTTP.
type Remote struct {
	Root string // GIT_PROJECT_ROOT when served
	Path string // the bare repository
}

// NewRemote makes an empty bare repository with "main" as its default
// branch.
func NewRemote(t testing.TB) *Remote {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, "repo.git")
	Git(t, "", "init", "--bare", "--quiet", "--initial-branch=main", path)
	// http-backend refuses pushes unless receive-pack is enabled.
	Git(t, path, "config", "http.receivepack", "true")
	return &Remote{Root: root, Path: path}
}

// FileURL is the repository's file:// URL.
func (r *Remote) FileURL() string { return "file://" + r.Path }

// Serve serves the repository over smart HTTP with the real git
// http-backend through net/http/cgi until the test ends, and returns its
// URL.
func (r *Remote) Serve(t testing.TB) string { return r.ServeThrough(t, nil) }

// ServeThrough serves the repository as Serve does, handing every request
// to wrap's handler (when wrap is not nil), which may hold or refuse it
// before git http-backend sees it.
func (r *Remote) ServeThrough(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	var h http.Handler = &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + r.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(http.StripPrefix("/git", h))
	t.Cleanup(srv.Close)
	return srv.URL + "/git/repo.git"
}

// Git runs the real git in dir, with no system or user configuration, and
// returns its trimmed output; a failure ends the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commits counts the commits on main, 0 when there is no branch yet.
func (r *Remote) Commits(t testing.TB) int {
	t.Helper()
	out, err := exec.Command("git", "-C", r.Path, "rev-list", "--count", "main").CombinedOutput()
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("git rev-list --count main printed %q", out)
	}
	return n
}

// Show returns the file at main, or at rev when given.
func (r *Remote) Show(t testing.TB, rev, path string) string {
	t.Helper()
	if rev == "" {
		rev = "main"
	}
	return Git(t, r.Path, "show", rev+":"+path)
}

// SeedMain gives the repository a main branch with one commit, as a
// repository a pull request can target, and returns that commit.
func (r *Remote) SeedMain(t testing.TB) string {
	t.Helper()
	work := t.TempDir()
	Git(t, "", "clone", "--quiet", r.FileURL(), work)
	Git(t, work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial")
	Git(t, work, "push", "--quiet", "origin", "HEAD:main")
	return Git(t, r.Path, "rev-parse", "main")
}

// FastForward is a fake SCM's merge of a pull request: the base branch
// moves to the pull request's head, refused unless that is a
// fast-forward.
func (r *Remote) FastForward(p scmtest.Pull) error {
	if err := exec.Command("git", "-C", r.Path, "merge-base", "--is-ancestor", p.Base, p.Head).Run(); err != nil {
		return fmt.Errorf("%s is not a fast-forward of %s", p.Head, p.Base)
	}
	out, err := exec.Command("git", "-C", r.Path, "update-ref", "refs/heads/"+p.Base, "refs/heads/"+p.Head).CombinedOutput()
	if err != nil {
		return fmt.Errorf("update-ref: %v: %s", err, out)
	}
	return nil
}

// NewBackend opens a Git backend on url, committing as "cairn test", with
// a cache of its own.
func NewBackend(t testing.TB, url string) *git.Backend { return Open(t, url, nil, nil) }

// Open opens a Git backend on url as NewBackend does, with settings added
// to (or replacing fields of) its configuration, and getenv (when not nil)
// answering its lookups of environment variables.
func Open(t testing.TB, url string, settings map[string]any, getenv func(string) string) *git.Backend {
	t.Helper()
	config := map[string]any{"url": url, "author": map[string]string{"name": "cairn test", "email": "test@cairn.dev"}}
	for k, v := range settings {
		config[k] = v
	}
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatalf("Git backend settings: %v", err)
	}
	cfg, err := git.ParseConfig(raw)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", raw, err)
	}
	b, err := git.New(git.Options{Config: cfg, CacheDir: filepath.Join(t.TempDir(), "cache"), Getenv: getenv})
	if err != nil {
		t.Fatalf("git.New: %v", err)
	}
	return b
}

// SpecOf decodes a resource file and returns its spec.
func SpecOf(t testing.TB, file string) json.RawMessage {
	t.Helper()
	var r struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal([]byte(file), &r); err != nil {
		t.Fatalf("resource file %q: %v", file, err)
	}
	return r.Spec
}
