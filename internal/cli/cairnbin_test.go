package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// cairnBuild is the cairn binary, built once for all the package's binary
// tests: linking the whole program took most of each such test's time.
var cairnBuild struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cairnBuild.dir != "" {
		os.RemoveAll(cairnBuild.dir)
	}
	os.Exit(code)
}

// cairnBinary returns the path of the cairn binary built from this
// checkout, building it on first use.
func cairnBinary(t *testing.T) string {
	t.Helper()
	cairnBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-cli-test-")
		if err != nil {
			cairnBuild.err = err
			return
		}
		cairnBuild.dir = dir
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "cairn"), "../../cmd/cairn").CombinedOutput(); err != nil {
			cairnBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if cairnBuild.err != nil {
		t.Fatal(cairnBuild.err)
	}
	return filepath.Join(cairnBuild.dir, "cairn")
}
