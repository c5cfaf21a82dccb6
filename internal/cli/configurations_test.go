package cli_test

import (
	"strings"
	"testing"
)

const sqlEnvStack = "../../examples/stacks/sql-env"

// A stack's configuration sets through the CLI: render renders the set -p
// names (or the default), refuses one the stack has not naming the field
// and the sets; stack add and stack show list them.
func TestConfigurationSetsCommands(t *testing.T) {
	names := func(out string) (n []string) {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  name: ") {
				n = append(n, strings.TrimPrefix(l, "  name: "))
			}
		}
		return n
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-p", "region=us-west2"}, "orders-network orders-main"},
		{[]string{"-p", "region=us-west2", "-p", "tier=dev"}, "orders-network orders-main"},
		{[]string{"-p", "region=us-west2", "-p", "tier=prod"}, "orders-network orders-main orders-replica"},
	}
	for _, tt := range tests {
		code, out, stderr := renderCLI(t, append([]string{"render", sqlEnvStack, "--name", "orders"}, tt.args...)...)
		if got := strings.Join(names(out), " "); code != 0 || got != tt.want {
			t.Errorf("render %v: exit %d, rendered %q, want %q (%s)", tt.args, code, got, tt.want, stderr)
		}
	}
	code, out, stderr := renderCLI(t, "render", sqlEnvStack, "-p", "region=us-west2", "-p", "tier=staging")
	if code != 2 || out != "" || !strings.Contains(stderr, `spec.tier must be equal to one of the allowed values: "dev", "prod"`) {
		t.Errorf("render of an unknown set: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	e := newEnv(t)
	if out := e.ok("stack", "add", sqlEnvStack); !strings.Contains(out, "; configuration sets (spec.tier): dev, prod (default dev)") {
		t.Errorf("stack add printed %q", out)
	}
	show := e.ok("stack", "show", "sql-env")
	for _, want := range []string{"Configuration sets (spec.tier, default dev):\n", "  dev\tresources/dev\tOne small zonal instance.\n",
		"  prod\tresources/prod\tA regional", "  tier\tstring\tThe size of the environment. One of: dev (One small zonal instance), prod"} {
		if !strings.Contains(show, want) {
			t.Errorf("stack show lacks %q:\n%s", want, show)
		}
	}
}
