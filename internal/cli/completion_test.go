package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
)

// completions runs cobra's hidden __complete command, as the scripts of
// `cairn completion bash|zsh|fish` do on Tab, and returns the candidates
// (without descriptions) and the directive line.
func completions(t *testing.T, r result) ([]string, string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("__complete: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var out []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		out = append(out, name)
	}
	return out, lines[len(lines)-1]
}

// Tab completes what only the hub knows, in both modes: resource types,
// the names of objects (in the namespace of -n), namespaces and output
// formats; never file names where a file makes no sense.
func TestCompletion(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		const noFiles = ":4" // cobra.ShellCompDirectiveNoFileComp
		tests := []struct {
			args []string
			want []string // exactly these candidates, in any order
			has  []string // at least these
			not  []string // and none of these
		}{
			{args: []string{"get", ""}, has: []string{"flags", "typeinstances", "types", "backends"}, not: []string{"subjectaccessreviews"}},
			{args: []string{"get", "fl"}, want: []string{"flags"}},
			{args: []string{"get", "flags", ""}, want: []string{"a", "b"}},
			{args: []string{"get", "flags", "a", ""}, want: []string{"b"}},
			{args: []string{"get", "flags", "-n", "other", ""}, want: []string{"c"}},
			{args: []string{"get", "flag/"}, want: []string{"flag/a", "flag/b"}},
			{args: []string{"describe", "fl", "b"}, want: []string{"b"}},
			{args: []string{"edit", "flags", "a", ""}, want: nil},
			{args: []string{"delete", "flags", "-n=other", ""}, want: []string{"c"}},
			{args: []string{"get", "nosuchkind", ""}, want: nil},
			{args: []string{"get", "flags", "-o", ""}, want: []string{"table", "wide", "json", "yaml", "name"}},
			{args: []string{"list", "-o", "j"}, want: []string{"json"}},
			{args: []string{"get", "flags", "-n", ""}, has: []string{"default", "other", "cairn-system"}},
			{args: []string{"types", "get", "io.flipt"}, want: []string{"io.flipt.flag:1.0.0-alpha.1"}},
		}
		for _, tt := range tests {
			t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
				got, directive := completions(t, s.run("", append([]string{"__complete"}, tt.args...)...))
				if directive != noFiles {
					t.Errorf("directive %s, want %s (no file names)", directive, noFiles)
				}
				if tt.has != nil {
					for _, w := range tt.has {
						if !slices.Contains(got, w) {
							t.Errorf("candidates %q lack %q", got, w)
						}
					}
					for _, w := range tt.not {
						if slices.Contains(got, w) {
							t.Errorf("candidates %q have %q", got, w)
						}
					}
					return
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tt.want))
				if !slices.Equal(got, want) {
					t.Errorf("candidates %q, want %q", got, want)
				}
			})
		}
	})

	t.Run("contexts", func(t *testing.T) {
		s := newServer(t)
		cfg := writeFile(t, t.TempDir(), "config.yaml", "contexts:\n- {name: dev, server: "+s.url+"}\n- {name: prod, server: http://127.0.0.1:1}\n")
		for _, args := range [][]string{{"__complete", "--context", ""}, {"__complete", "config", "use-context", ""}} {
			r := s.runCtx(context.Background(), nil, map[string]string{cli.EnvConfig: cfg}, "", args...)
			if got, _ := completions(t, r); !slices.Equal(got, []string{"dev", "prod"}) {
				t.Errorf("%q: candidates %q, want dev and prod", args, got)
			}
		}
	})

	t.Run("a local store is not created by Tab", func(t *testing.T) {
		s := newFixture(t, true)
		dir := filepath.Join(s.dir, "fresh")
		r := s.runCtx(context.Background(), nil, map[string]string{cli.EnvDataDir: dir}, "", "__complete", "get", "")
		if got, _ := completions(t, r); len(got) != 0 {
			t.Errorf("candidates %q without a store, want none", got)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("completion made %s: %v", dir, err)
		}
	})
}
