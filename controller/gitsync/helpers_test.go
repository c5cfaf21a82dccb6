package gitsync_test

import (
	"encoding/json"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/backend/git"
)

// remote is a bare repository reachable over file:// and, once served,
// smart HTTP.
type remote struct {
	t    *testing.T
	root string // GIT_PROJECT_ROOT
	path string // the bare repository
}

// newRemote makes an empty bare repository with "main" as its default
// branch.
func newRemote(t testing.TB) *remote {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, "repo.git")
	gitCmd(t, "", "init", "--bare", "--quiet", "--initial-branch=main", path)
	// http-backend refuses pushes unless receive-pack is enabled.
	gitCmd(t, path, "config", "http.receivepack", "true")
	return &remote{root: root, path: path}
}

func (r *remote) fileURL() string { return "file://" + r.path }

// serveHTTP serves the bare repository over smart HTTP with the real
// git http-backend through net/http/cgi.
func (r *remote) serveHTTP(t testing.TB) string {
	t.Helper()
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + r.root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.StripPrefix("/git", h))
	t.Cleanup(srv.Close)
	return srv.URL + "/git/repo.git"
}

// gitCmd runs the real git and returns its trimmed output.
func gitCmd(t testing.TB, dir string, args ...string) string {
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

// commits counts the commits on main, 0 when there is no branch yet.
func (r *remote) commits(t testing.TB) int {
	t.Helper()
	out, err := exec.Command("git", "-C", r.path, "rev-list", "--count", "main").CombinedOutput()
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range strings.TrimSpace(string(out)) {
		n = n*10 + int(c-'0')
	}
	return n
}

// show returns the file at main (or at rev when given).
func (r *remote) show(t testing.TB, rev, path string) string {
	t.Helper()
	if rev == "" {
		rev = "main"
	}
	return gitCmd(t, r.path, "show", rev+":"+path)
}

// newBackend opens a Git backend on url with a cache of its own.
func newBackend(t testing.TB, url string) *git.Backend {
	t.Helper()
	cfg, err := git.ParseConfig(json.RawMessage(`{"url":` + quote(url) + `,"author":{"name":"cairn test","email":"test@cairn.dev"}}`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	b, err := git.New(git.Options{Config: cfg, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatalf("git.New: %v", err)
	}
	return b
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// specOf decodes a resource file and returns its spec.
func specOf(t testing.TB, file string) json.RawMessage {
	t.Helper()
	var r struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal([]byte(file), &r); err != nil {
		t.Fatalf("resource file %q: %v", file, err)
	}
	return r.Spec
}
