package wasm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testDir holds the modules built for this test binary's run and the
// on-disk compilation cache its runtimes share; TestMain sets it once.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type builtModules struct {
	example, probe []byte
	skip           string // why wasip1 cannot be built here, if it cannot
}

// buildModules builds the example controller and the probe once per test
// binary run, in one go build so that the runtime is compiled once.
var buildModules = sync.OnceValues(func() (builtModules, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return builtModules{skip: "no go tool in PATH: " + err.Error()}, nil
	}
	out, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		return builtModules{}, fmt.Errorf("go env GOMOD: %w", err)
	}
	modRoot := filepath.Dir(strings.TrimSpace(string(out)))
	binDir := filepath.Join(testDir, "bin")
	cmd := exec.Command(goTool, "build", "-o", binDir+string(os.PathSeparator), "./examples/wasm-controller", "./backend/wasm/testdata/probe")
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "unsupported GOOS/GOARCH") {
			return builtModules{skip: "the Go toolchain cannot build wasip1/wasm: " + string(out)}, nil
		}
		return builtModules{}, fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build: %w\n%s", err, out)
	}
	var b builtModules
	if b.example, err = os.ReadFile(filepath.Join(binDir, "wasm-controller")); err != nil {
		return b, fmt.Errorf("read the example controller: %w", err)
	}
	if b.probe, err = os.ReadFile(filepath.Join(binDir, "probe")); err != nil {
		return b, fmt.Errorf("read the probe: %w", err)
	}
	return b, nil
})

// modules returns the built modules, skipping the test loudly when the
// toolchain cannot build wasip1, except on CI where that is a failure.
func modules(t testing.TB) builtModules {
	t.Helper()
	b, err := buildModules()
	if err != nil {
		t.Fatal(err)
	}
	if b.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", b.skip)
		}
		t.Skipf("SKIPPING WASM TESTS: %s", b.skip)
	}
	return b
}

// newRuntime returns a runtime with opts sharing the run's compilation
// cache, closed at the end of the test.
func newRuntime(t testing.TB, opts Options) *Runtime {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(testDir, "cache")
	}
	r, err := NewRuntime(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r
}

func load(t testing.TB, r *Runtime, name string, module []byte) *Controller {
	t.Helper()
	c, err := r.Load(context.Background(), name, module)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
