package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
)

// The committed reference (docs/cli) is what the commands generate.
func TestReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := cli.Reference(dir); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	got, _ := filepath.Glob("../../docs/cli/*.md")
	names := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = filepath.Base(p)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(names(want), names(got)) {
		t.Fatalf("docs/cli is stale (pages %v, want %v): run go generate ./internal/cli", names(got), names(want))
	}
	for _, p := range want {
		w, _ := os.ReadFile(p)
		g, err := os.ReadFile(filepath.Join("../../docs/cli", filepath.Base(p)))
		if err != nil || string(g) != string(w) {
			t.Errorf("docs/cli/%s is stale: run go generate ./internal/cli", filepath.Base(p))
		}
	}
}
