package labels

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary label selectors (the labelSelector query
// parameter, the CLI's -l): Parse fails with an error that says something,
// or returns a selector whose String parses again to the same selector.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b,c!=d", "env in (prod, dev)", "!tier", "x notin (a)", "a", "a=", "in (x)",
		"example.com/key=v", "a=b,,c", "a in (", strings.Repeat("a,", 200) + "b", "a=\x00", "é=ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		s, err := Parse(sel)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse(%q): empty error", sel)
			}
			return
		}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse again: %v", sel, s.String(), err)
		}
		if again.String() != s.String() {
			t.Fatalf("Parse(%q): %q parses to %q", sel, s.String(), again.String())
		}
		set := map[string]string{"a": "b", "env": "prod"}
		if s.Matches(set) != again.Matches(set) {
			t.Fatalf("Parse(%q): the selector and its String disagree on %v", sel, set)
		}
	})
}
