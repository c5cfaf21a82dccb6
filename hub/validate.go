package hub

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// The names every create checks are matched by hand (validate_test.go
// holds the regular expressions they equal, and checks that they do):
// five regular expressions cost about 1 % of a create's CPU.
//
//   - a Type or attribute path: dot-separated segments, at least two, e.g.
//     cap.type.database.postgresql.config:
//     ^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)+$
//   - a revision, a semantic version (0.1.0, 1.2.0-rc.1):
//     ^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$
//   - a namespace, an RFC 1123 label: ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
//   - an object name, an RFC 1123 subdomain:
//     ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
//   - an alias (a usesRelations end, a template alias):
//     ^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$

func lowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func anyAlnum(c byte) bool   { return lowerAlnum(c) || 'A' <= c && c <= 'Z' }
func pathInner(c byte) bool  { return lowerAlnum(c) || c == '_' || c == '-' }
func dnsInner(c byte) bool   { return lowerAlnum(c) || c == '-' }
func aliasInner(c byte) bool { return anyAlnum(c) || c == '_' || c == '.' || c == '-' }

// isWord reports whether s is one byte that edge accepts, or two or more
// whose first and last edge accepts and the others inner.
func isWord(s string, edge, inner func(byte) bool) bool {
	if s == "" || !edge(s[0]) || !edge(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !inner(s[i]) {
			return false
		}
	}
	return true
}

// isWords reports whether s is at least min words (isWord) joined by dots.
func isWords(s string, min int, edge, inner func(byte) bool) bool {
	n := 0
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return isWord(s, edge, inner) && n+1 >= min
		}
		if !isWord(s[:i], edge, inner) {
			return false
		}
		s, n = s[i+1:], n+1
	}
}

func isPath(s string) bool         { return isWords(s, 2, lowerAlnum, pathInner) }
func isDNSLabel(s string) bool     { return isWord(s, lowerAlnum, dnsInner) }
func isDNSSubdomain(s string) bool { return isWords(s, 1, lowerAlnum, dnsInner) }
func isAlias(s string) bool        { return isWord(s, anyAlnum, aliasInner) }

// isRevision reports whether s is digits.digits.digits, then optionally
// "-" and one or more of [0-9A-Za-z.-], then optionally "+" and one or more
// of the same.
func isRevision(s string) bool {
	for part := range 3 {
		i := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return false
		}
		s = s[i:]
		if part < 2 {
			if s == "" || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
	}
	for _, sep := range []byte{'-', '+'} {
		if s == "" || s[0] != sep {
			continue
		}
		i := 1
		for i < len(s) && (anyAlnum(s[i]) || s[i] == '.' || s[i] == '-') {
			i++
		}
		if i == 1 {
			return false
		}
		s = s[i:]
	}
	return s == ""
}

var (
	// versionRE: a Kubernetes API version (v1, v1alpha1, v2beta3).
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	// kindRE: a Kubernetes kind.
	kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

func checkPath(field, p string) *cairn.Cause {
	if p == "" {
		return &cairn.Cause{Field: field, Message: "is required"}
	}
	if !isPath(p) {
		return &cairn.Cause{Field: field, Message: fmt.Sprintf("%q must be dot-separated lowercase segments of [a-z0-9_-], e.g. cap.type.database.postgresql.config", p)}
	}
	return nil
}

func checkRevision(field, r string) *cairn.Cause {
	if r == "" {
		return &cairn.Cause{Field: field, Message: "is required"}
	}
	if !isRevision(r) {
		return &cairn.Cause{Field: field, Message: fmt.Sprintf("%q must be a semantic version, e.g. 0.1.0", r)}
	}
	return nil
}

func checkNamespace(ns string) *cairn.Cause {
	if len(ns) > 63 || !isDNSLabel(ns) {
		return &cairn.Cause{Field: "metadata/namespace", Message: fmt.Sprintf("%q must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending alphanumeric", ns)}
	}
	return nil
}

// checkScopedNamespace checks a new instance's namespace against its Type's
// scope: an instance of a Cluster Type has none, one of a Namespaced Type has
// one (default when not given).
func checkScopedNamespace(ns *string, scope cairn.Scope, kind string) *cairn.Cause {
	if scope == cairn.ScopeCluster {
		if *ns != "" {
			return &cairn.Cause{Field: "metadata/namespace", Message: fmt.Sprintf("%q: %s is cluster-scoped: its objects have no namespace; leave it out", *ns, kind)}
		}
		return nil
	}
	if *ns == "" {
		*ns = cairn.DefaultNamespace
	}
	return checkNamespace(*ns)
}

func checkName(name string) *cairn.Cause {
	if len(name) > 253 || !isDNSSubdomain(name) {
		return &cairn.Cause{Field: "metadata/name", Message: fmt.Sprintf("%q must be a DNS subdomain: at most 253 lowercase alphanumerics, '-' or '.', starting and ending alphanumeric", name)}
	}
	return nil
}

func checkAlias(alias string) *cairn.Cause {
	if len(alias) > 253 || !isAlias(alias) {
		return &cairn.Cause{Field: "alias", Message: fmt.Sprintf("%q must be at most 253 characters of [A-Za-z0-9_.-], starting and ending alphanumeric", alias)}
	}
	return nil
}

func checkAttributes(attrs []cairn.AttributeRef) []cairn.Cause {
	var causes []cairn.Cause
	seen := map[cairn.AttributeRef]bool{}
	for i, a := range attrs {
		field := fmt.Sprintf("attributes/%d", i)
		if c := checkPath(field+"/path", a.Path); c != nil {
			causes = append(causes, *c)
		}
		if c := checkRevision(field+"/revision", a.Revision); c != nil {
			causes = append(causes, *c)
		}
		if seen[a] {
			causes = append(causes, cairn.Cause{Field: field, Message: fmt.Sprintf("duplicate attribute %s:%s", a.Path, a.Revision)})
		}
		seen[a] = true
	}
	return causes
}

// checkREST validates a Type's optional REST names: all or nothing.
func checkREST(t cairn.Type) []cairn.Cause {
	if t.Group == "" && t.Version == "" && t.Names == nil {
		return nil
	}
	var causes []cairn.Cause
	// Kubernetes' own dot-less groups (and core, its nameless core group)
	// are allowed so a stack's rendered Deployments, Jobs and ConfigMaps
	// can be stored and served.
	if !cairn.KubernetesGroup(t.Group) && (t.Group == "" || len(t.Group) > 253 || !isDNSSubdomain(t.Group) || !strings.Contains(t.Group, ".")) {
		causes = append(causes, cairn.Cause{Field: "group", Message: fmt.Sprintf("%q must be a DNS subdomain with at least one dot, e.g. flipt.io, or one of Kubernetes' own groups core, apps, batch, autoscaling, policy, extensions", t.Group)})
	}
	if rbac.Reserved(t.Group) {
		// cairn serves these itself; a Type there would also fall under
		// the default roles' rules for them.
		causes = append(causes, cairn.Cause{Field: "group", Message: fmt.Sprintf("%q is reserved: cairn serves it itself (hub.cairn.dev, rbac.authorization.k8s.io, authorization.k8s.io, authentication.k8s.io)", t.Group)})
	}
	if !versionRE.MatchString(t.Version) {
		causes = append(causes, cairn.Cause{Field: "version", Message: fmt.Sprintf("%q must be a Kubernetes API version, e.g. v1 or v1alpha1", t.Version)})
	}
	if t.Names == nil {
		return append(causes, cairn.Cause{Field: "names", Message: "is required when group or version is set"})
	}
	if !kindRE.MatchString(t.Names.Kind) {
		causes = append(causes, cairn.Cause{Field: "names/kind", Message: fmt.Sprintf("%q must be CamelCase, e.g. Flag", t.Names.Kind)})
	}
	if !isDNSLabel(t.Names.Plural) {
		causes = append(causes, cairn.Cause{Field: "names/plural", Message: fmt.Sprintf("%q must be a lowercase DNS label, e.g. flags", t.Names.Plural)})
	}
	if t.Names.Singular != "" && !isDNSLabel(t.Names.Singular) {
		causes = append(causes, cairn.Cause{Field: "names/singular", Message: fmt.Sprintf("%q must be a lowercase DNS label, e.g. flag", t.Names.Singular)})
	}
	for i, s := range t.Names.ShortNames {
		if !isDNSLabel(s) {
			causes = append(causes, cairn.Cause{Field: fmt.Sprintf("names/shortNames/%d", i), Message: fmt.Sprintf("%q must be a lowercase DNS label", s)})
		}
	}
	return causes
}

// invalid builds one Invalid error from causes, or nil.
func invalid(subject, what string, causes []cairn.Cause) error {
	if len(causes) == 0 {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeInvalid, Subject: subject, Causes: causes,
		Msg: fmt.Sprintf("%s: %s", what, joinCauses(causes))}
}
