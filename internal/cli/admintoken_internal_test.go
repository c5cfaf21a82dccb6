package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminTokenKeptPrivate: an admin token others may read (copied with
// cp, written by hand, restored from a backup) is made the OS user's alone
// at start, and the server says so; a new one is written 0600.
func TestAdminTokenKeptPrivate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode os.FileMode // of an existing file; 0: none
		warn bool
	}{
		{"new", 0, false},
		{"private", 0o600, false},
		{"world-readable", 0o644, true},
		{"group-readable", 0o640, true},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "admin.token")
		if tc.mode != 0 {
			if err := os.WriteFile(path, []byte("Zq9-admin-token\n"), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // past the umask
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		tok, got, err := (&app{dataDir: dir}).adminToken(slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil || got != path || tok == "" {
			t.Fatalf("%s: %q %q %v", tc.name, tok, got, err)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", tc.name, st, err)
		}
		if warned := strings.Contains(logs.String(), "readable by others"); warned != tc.warn {
			t.Errorf("%s: warned %v, want %v: %s", tc.name, warned, tc.warn, logs.String())
		}
		if strings.Contains(logs.String(), tok) {
			t.Errorf("%s: the log holds the token: %s", tc.name, logs.String())
		}
	}
}
