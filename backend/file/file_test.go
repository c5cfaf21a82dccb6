package file_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/file"
)

func newBackend(t *testing.T, cfg file.Config) *file.Backend {
	t.Helper()
	b, err := file.New(cfg)
	if err != nil {
		t.Fatalf("file.New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			return newBackend(t, file.Config{Dir: t.TempDir()})
		},
		AcceptValue: true,
	})
}

func TestConformanceContextOnly(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "releases", "web.json"), `{"chart":"nginx","version":"1.2.3"}`)
			return newBackend(t, file.Config{Dir: t.TempDir(), Source: src})
		},
		Context:      json.RawMessage(`{"file":"releases/web.json"}`),
		ContextValue: json.RawMessage(`{"chart":"nginx","version":"1.2.3"}`),
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listDir returns the names under dir, relative, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLayout checks the files a user sees: one per revision holding the
// value as sent, a lock file while locked, nothing after a delete.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, file.Config{Dir: dir})
	ctx := t.Context()
	id := uuid.NewString()
	if _, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.OnLock(ctx, cairn.OnLockRequest{InstanceID: id, LockedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	want := []string{id, id + "/1.json", id + "/2.json", id + "/lock"}
	if got := listDir(t, dir); !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if got := read(t, filepath.Join(dir, id, "2.json")); got != `{"a":2}` {
		t.Errorf("2.json = %q", got)
	}
	if got := read(t, filepath.Join(dir, id, "lock")); got != "alice" {
		t.Errorf("lock = %q", got)
	}
	if err := b.OnUnlock(ctx, cairn.OnUnlockRequest{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, id, "lock")); !os.IsNotExist(err) {
		t.Errorf("lock file after unlock: %v", err)
	}
	if err := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("files after delete = %v, want none", got)
	}
}

// TestLeftoversRemovedAtStart simulates a crash mid-write: temporary files
// and a half-deleted instance are gone when the backend starts again, and
// the complete instance is intact.
func TestLeftoversRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	id := uuid.NewString()
	writeFile(t, filepath.Join(dir, id, "1.json"), `1`)
	writeFile(t, filepath.Join(dir, id, ".tmp-123"), `{"half`)
	writeFile(t, filepath.Join(dir, ".tmp-456", "1.json"), `2`)
	writeFile(t, filepath.Join(dir, ".trash-789", "1.json"), `3`)
	b := newBackend(t, file.Config{Dir: dir})
	if got, want := listDir(t, dir), []string{id, id + "/1.json"}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err != nil || string(v) != "1" {
		t.Errorf("GetValue = %s, %v", v, err)
	}
}

// TestExpiredRequestWritesNothing: a create whose caller gave up must not
// be committed, or it would outlive the hub's rollback.
func TestExpiredRequestWritesNothing(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, file.Config{Dir: dir})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`1`)})
	if err == nil {
		t.Fatal("OnCreate with a cancelled context succeeded")
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("files = %v, want none", got)
	}
}

func TestBadInput(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "ok.json"), `1`)
	values := newBackend(t, file.Config{Dir: t.TempDir()})
	contexts := newBackend(t, file.Config{Dir: t.TempDir(), Source: src})
	ctx := t.Context()
	id := uuid.NewString()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"path in the id", func() error {
			_, err := values.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: "../etc", Value: json.RawMessage(`1`)})
			return err
		}(), `TypeInstance id "../etc": only letters, digits`},
		{"invalid JSON value", func() error {
			_, err := values.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{`)})
			return err
		}(), "the value is not valid JSON"},
		{"revision 0", func() error {
			_, err := values.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 0})
			return err
		}(), "resource version 0: must be 1 or more"},
		{"lock without owner", values.OnLock(ctx, cairn.OnLockRequest{InstanceID: id}), "the lock owner is empty"},
		{"context missing", func() error {
			_, err := contexts.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id})
			return err
		}(), `a context {"file": "<path under the source directory>"} is required`},
		{"context escapes the source", func() error {
			_, err := contexts.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Context: json.RawMessage(`{"file":"../secret"}`)})
			return err
		}(), `context file "../secret": must be a relative path inside the source directory`},
		{"context names a missing file", func() error {
			_, err := contexts.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: json.RawMessage(`{"file":"nope.json"}`)})
			return err
		}(), `context file "nope.json" does not exist`},
	}
	for _, tt := range tests {
		if !cairn.HasCode(tt.err, cairn.CodeInvalid) || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: error %v, want Invalid with %q", tt.name, tt.err, tt.want)
		}
	}
}

func TestContextOnlyValueFollowsTheFile(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "motd.txt"), "hello")
	b := newBackend(t, file.Config{Dir: t.TempDir(), Source: src})
	ctx := t.Context()
	id := uuid.NewString()
	c := json.RawMessage(`{"file":"motd.txt"}`)
	if _, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Context: c}); err != nil {
		t.Fatal(err)
	}
	get := func() string {
		v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1, Context: c})
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if got := get(); got != `"hello"` {
		t.Errorf("value = %s, want the text as a JSON string", got)
	}
	writeFile(t, filepath.Join(src, "motd.txt"), `{"greeting":"hi"}`)
	if got := get(); got != `{"greeting":"hi"}` {
		t.Errorf("value after the file changed = %s", got)
	}
}
