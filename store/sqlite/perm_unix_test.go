//go:build unix

package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestNewDatabaseIsPrivate: the database holds every value of the built-in
// backend, secrets among them, so a store created under the usual umask
// (022) is readable by its OS user alone: the directories it creates, the
// database and its WAL and shared-memory files. They were 0755 and 0644,
// readable by every user of the machine, whom the server itself refuses.
func TestNewDatabaseIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "cairn.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{dir, path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for group and others", p, perm)
		}
	}
}
