package cli_test

import (
	"strings"
	"testing"
)

// TestParamValuesAsTyped: render and plan read -p title=no as the string
// typed (YAML 1.1 would make it false, which the string parameter
// refuses), and plan takes a dotted key as render does.
func TestParamValuesAsTyped(t *testing.T) {
	code, out, stderr := renderCLI(t, "render", "../../examples/stacks/team-portal", "-o", "json", "-p", "title=no")
	if code != 0 || !strings.Contains(out, `"title": "no"`) {
		t.Fatalf("render -p title=no: exit %d, %s %s", code, out, stderr)
	}
	s := newFixture(t, true)
	s.ok("stack", "add", "../../examples/stacks/flags-env")
	s.ok("stack", "add", "../../examples/stacks/team-portal")
	if out := s.ok("plan", "team-portal", "-p", "title=no", "-p", "team=0123"); !strings.Contains(out, `parameter title = "no"`) || !strings.Contains(out, `parameter team = "0123"`) {
		t.Errorf("plan -p title=no -p team=0123:\n%s", out)
	}
}
