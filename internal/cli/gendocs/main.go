// Command gendocs writes the CLI reference (docs/cli) from the cobra
// commands: go generate ./internal/cli, or go run ./internal/cli/gendocs DIR.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Pages of commands that no longer exist must go.
	old, _ := filepath.Glob(filepath.Join(dir, "cairn*.md"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := cli.Reference(dir); err != nil {
		fmt.Fprintln(os.Stderr, "write the CLI reference:", err)
		os.Exit(1)
	}
}
