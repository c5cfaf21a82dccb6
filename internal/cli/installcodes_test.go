package cli_test

import (
	"strings"
	"testing"
)

// TestInstallExitCodes: cairn install exits as cairn plan does for the same
// error, in both modes (the server streams an install's error with its
// Status, so the code survives the stream): 2 for a plan that cannot
// complete, 3 for a stack not in the catalog.
func TestInstallExitCodes(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.ok("stack", "add", "../../examples/stacks/flags-env")
		s.ok("stack", "add", "../../examples/dependencies/reporting")
		for _, c := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"reporting", "-p", "team=data"}, 2, "no installation in default or global satisfies the interface"},
			{[]string{"nosuchstack"}, 3, "nosuchstack"},
		} {
			for _, verb := range []string{"plan", "install"} {
				r := s.run("", append([]string{verb}, c.args...)...)
				if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
					t.Errorf("cairn %s %s: exit %d %q, want %d and %q", verb, strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
				}
			}
		}
	})
}
