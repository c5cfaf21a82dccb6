package graphql_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the executor and the input models
// from schema.graphqls into a scratch copy of the package and fails when
// they differ from the committed files: edit the schema, run
// `go generate ./api/graphql`, commit both.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gqlgen (a few seconds)")
	}
	// The copy must live inside the module for gqlgen to load it by import
	// path; a leading underscore keeps ./... patterns (and other builds)
	// away from it.
	scratch, err := os.MkdirTemp(".", "_gencheck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	pkg := "github.com/cairn-dev/cairn/api/graphql/" + filepath.Base(scratch)
	if err := os.MkdirAll(filepath.Join(scratch, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "schema.graphqls", filepath.Join(scratch, "schema.graphqls"))
	copyFile(t, filepath.Join("model", "model.go"), filepath.Join(scratch, "model", "model.go"))
	cfg, err := os.ReadFile("gqlgen.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte("github.com/cairn-dev/cairn/api/graphql/model"), []byte(pkg+"/model"))
	if err := os.WriteFile(filepath.Join(scratch, "gqlgen.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "run", "github.com/99designs/gqlgen", "generate", "--config", "gqlgen.yml")
	cmd.Dir = scratch
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gqlgen: %v\n%s", err, out)
	}
	for _, f := range []string{filepath.Join("exec", "generated.go"), filepath.Join("model", "models_gen.go")} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(scratch, f))
		if err != nil {
			t.Fatal(err)
		}
		got = bytes.ReplaceAll(got, []byte(pkg+"/"), []byte("github.com/cairn-dev/cairn/api/graphql/"))
		// gqlgen also spells the package path inside generated names.
		got = bytes.ReplaceAll(got, []byte("ᚋ"+filepath.Base(scratch)+"ᚋ"), []byte("ᚋ"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what gqlgen generates from schema.graphqls; run go generate ./api/graphql (first differing line: %s)", f, firstDiff(got, want))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return strings.TrimSpace(al[i]) + " vs " + strings.TrimSpace(bl[i])
		}
	}
	return "(lengths differ)"
}
