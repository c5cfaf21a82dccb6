package storagebackendpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// protocVersionLine matches the header lines that record which protoc made
// the file; they differ between machines without the code differing.
var protocVersionLine = regexp.MustCompile(`(?m)^//\s+(-\s+)?protoc\s+v?[0-9.]+\s*$`)

// TestGeneratedCodeIsCurrent regenerates the Go code from
// ../storage_backend.proto with the pinned plugins and fails when it differs
// from what is committed: the .proto and the code must not drift apart.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the protoc plugins")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		msg := "!!! protoc NOT FOUND: the check that proto/storagebackendpb matches proto/storage_backend.proto DID NOT RUN. " +
			"Install it with `apt-get install -y protobuf-compiler` (scripts/with-services does this when it can)."
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := t.TempDir()
	cmd := exec.Command("../gen.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("../gen.sh: %v\n%s", err, b)
	}
	generated, _ := filepath.Glob(filepath.Join(out, "*.pb.go"))
	committed, _ := filepath.Glob("*.pb.go")
	names := func(paths []string) []string {
		var n []string
		for _, p := range paths {
			n = append(n, filepath.Base(p))
		}
		slices.Sort(n)
		return n
	}
	if g, c := names(generated), names(committed); !slices.Equal(g, c) {
		t.Fatalf("regeneration makes %v, committed are %v: run `go generate ./proto/...` and commit", g, c)
	}
	for _, name := range names(committed) {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want = protocVersionLine.ReplaceAll(want, nil)
		got = protocVersionLine.ReplaceAll(got, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what ../storage_backend.proto generates: run `go generate ./proto/...` and commit the result", name)
		}
	}
}
