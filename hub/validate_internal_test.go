package hub

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The regular expressions the hand matchers of validate.go stand for.
var (
	pathRE         = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)+$`)
	revisionRE     = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	dnsLabelRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	aliasRE        = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
)

// TestNameMatchersAsRegexps: each hand matcher accepts exactly what its
// regular expression does, on hand-picked strings and on 300,000 random
// ones (some after a prefix the grammars accept) over the bytes that matter (every class's edges, separators, a
// multi-byte rune, a newline).
func TestNameMatchersAsRegexps(t *testing.T) {
	matchers := []struct {
		name string
		re   *regexp.Regexp
		fn   func(string) bool
	}{
		{"path", pathRE, isPath},
		{"revision", revisionRE, isRevision},
		{"dns label", dnsLabelRE, isDNSLabel},
		{"dns subdomain", dnsSubdomainRE, isDNSSubdomain},
		{"alias", aliasRE, isAlias},
	}
	fixed := []string{"", "a", "A", "0", ".", "-", "_", "+", "a.b", "cap.type.a", "cap..a", ".a", "a.", "a-b", "a_b", "-a", "a-",
		"a.b-", "cap.type.database.postgresql.config", "0.1.0", "1.2.0-rc.1", "1.2.3+b.1", "1.2.3-a+b", "1.2.3+a+b", "1.2.3-",
		"1.2.3+", "1.2", "1.2.3.4", "01.2.3", "1.2.3--", "1.2.3-+b", "v1.2.3", "1.2.3\n", "a\n", "é", "aé", "flag-0001", "Flag",
		"default", "kube-system", "x.y.z", "A.b", "a..b", "1.2.3-A.b-c+D.e-f"}
	alphabet := []string{"a", "z", "A", "Z", "0", "9", ".", "-", "_", "+", "é", "\n", " ", "/"}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		for _, m := range matchers {
			if got, want := m.fn(s), m.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the regular expression says %v", m.name, s, got, want)
			}
		}
	}
	for _, s := range fixed {
		check(s)
	}
	// Random strings, half of them after a prefix that most of the
	// grammars accept, so that accepted strings are common too.
	prefixes := []string{"", "1.2.3", "0.1.", "1.2.3-", "1.2.3+", "cap.type", "a.b", "flag-", "A"}
	rounds := 300_000
	if raceEnabled {
		rounds = 30_000
	}
	for i := range rounds {
		n := rng.IntN(9)
		b := make([]byte, 0, 2*n+8)
		if i%2 == 1 {
			b = append(b, prefixes[rng.IntN(len(prefixes))]...)
		}
		for range n {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		check(string(b))
	}
}

// BenchmarkNameChecks: the five names a REST create checks (Type path and
// revision, namespace, name, alias), by the regular expressions ("regexp",
// as before) and by the hand matchers ("hand").
func BenchmarkNameChecks(b *testing.B) {
	path, rev, ns, name := "io.flipt.flag", "1.0.0-alpha.1", "default", "c-a1-12-3456"
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if !pathRE.MatchString(path) || !revisionRE.MatchString(rev) || !dnsLabelRE.MatchString(ns) ||
				!dnsSubdomainRE.MatchString(name) || !aliasRE.MatchString(name) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if !isPath(path) || !isRevision(rev) || !isDNSLabel(ns) || !isDNSSubdomain(name) || !isAlias(name) {
				b.Fatal("refused")
			}
		}
	})
}
