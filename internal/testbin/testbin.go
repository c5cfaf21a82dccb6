// Package testbin builds the module's programs for tests that run them as
// processes (cairn serve, the documentation's commands, a WASM controller).
//
// Every package's tests share one output directory per checkout, so a
// program is linked once for a whole `go test ./...`, not once per package
// that runs it: the go command's build cache holds compiled packages but not
// a program linked to a new path, and linking cmd/cairn cost about 5 CPU
// seconds each time (six test binaries did it on every run). go build finds
// the file already there up to date and only checks it (about half a
// second); anything that changes the program (its sources, GOFLAGS, the
// toolchain) changes its build ID, and go build links it again.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Cairn returns the path of cmd/cairn built from the checkout the test runs
// in, ending the test if it cannot be built.
func Cairn(tb testing.TB) string {
	tb.Helper()
	path, err := Build("./cmd/cairn", "cairn")
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Build builds pkg, a package path relative to the module root, with env
// added to the environment (GOOS=wasip1, say), into a file called name in
// a directory of its own (so the directory can go on a PATH), and returns
// the file's path. Builds of one checkout take a lock, so two test binaries
// running at once do not both link the same program.
func Build(pkg, name string, env ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	// One directory per checkout and per program's environment: two
	// worktrees, or cairn and a wasip1 module, never share a file.
	key := sha256.Sum256([]byte(root + "\x00" + pkg + "\x00" + strings.Join(env, "\x00")))
	dir := filepath.Join(base, "cairn-test-bin", hex.EncodeToString(key[:8]), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("directory for %s: %w", pkg, err)
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(dir), name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("lock for building %s: %w", pkg, err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock for building %s: %w", pkg, err)
	}
	path := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", path, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (in %s, %s): %w\n%s", pkg, root, strings.Join(env, " "), err, out)
	}
	return path, nil
}
