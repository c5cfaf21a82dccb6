package cli

import (
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/deps"
)

// -p VALUE is read as YAML 1.2 reads a scalar, but what a person types as
// text stays text: YAML 1.1's yes/no/on/off/y/n, a number with a leading
// zero (YAML 1.1's octal, a zip code to a person), hex, a date, null.
func TestParseParamValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
	}{
		{"no", "no"}, {"yes", "yes"}, {"on", "on"}, {"off", "off"}, {"y", "y"}, {"N", "N"},
		{"0123", "0123"}, {"0x1F", "0x1F"}, {"0o17", "0o17"}, {"2026-01-01", "2026-01-01"}, {"null", "null"}, {"~", "~"},
		{"1_000", "1_000"}, {".inf", ".inf"}, {"", ""}, {"web", "web"}, {"us-west1", "us-west1"},
		{"true", true}, {"false", false}, {"3", 3.0}, {"-2", -2.0}, {"0", 0.0}, {"1.5", 1.5}, {"1e3", 1e3},
		{"[a, b]", []any{"a", "b"}}, {"{a: 1}", map[string]any{"a": 1.0}}, {`"3"`, "3"}, {`'no'`, "no"}, {"!!str 3", "3"},
		{"Team #1", "Team #1"}, {"Note: hello", "Note: hello"}, {"- a", "- a"},
	} {
		got, err := parseParamValue(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseParamValue(%q) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	if _, err := parseParamValue("[a"); err == nil {
		t.Error(`parseParamValue("[a") succeeded`)
	}
}

// plan and install set a dotted -p KEY in a nested parameter, as render
// does, and -p wins over -f.
func TestParseParamsDotted(t *testing.T) {
	got, err := parseParams([]string{"tls.issuer=le", "tls.enabled=true", "replicas=2"}, nil)
	want := map[string]any{"tls": map[string]any{"issuer": "le", "enabled": true}, "replicas": 2.0}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseParams = %#v, %v; want %#v", got, err, want)
	}
}

// --dependency-param and --dependency-credential answer a dependency's
// unmapped inputs: PATH.NAME, split at the last dot (names have none).
func TestParseInputs(t *testing.T) {
	got, err := parseInputs([]string{"flags.team=web", "web.db.size=3"}, []string{"web.db.token=dev/token"})
	want := map[string]deps.Inputs{
		"flags":  {Parameters: map[string]any{"team": "web"}},
		"web.db": {Parameters: map[string]any{"size": 3.0}, Credentials: map[string]string{"token": "dev/token"}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseInputs = %#v, %v; want %#v", got, err, want)
	}
	for _, bad := range [][2][]string{{{"team=web"}}, {{".team=web"}}, {{"flags.=web"}}, {{"flags.team"}}, {nil, {"db.token"}}, {nil, {"token=dev/t"}}} {
		if _, err := parseInputs(bad[0], bad[1]); err == nil {
			t.Errorf("parseInputs(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
