package hub

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

var (
	// pathRE: dot-separated segments, e.g. cap.type.database.postgresql.config.
	pathRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)+$`)
	// revisionRE: semantic version, e.g. 0.1.0 or 1.2.0-rc.1.
	revisionRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// dnsLabelRE: a Kubernetes namespace (RFC 1123 label).
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// dnsSubdomainRE: a Kubernetes object name (RFC 1123 subdomain).
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// aliasRE: what can appear in a usesRelations end or a template alias.
	aliasRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	// versionRE: a Kubernetes API version (v1, v1alpha1, v2beta3).
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	// kindRE: a Kubernetes kind.
	kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

func checkPath(field, p string) *cairn.Cause {
	if p == "" {
		return &cairn.Cause{Field: field, Message: "is required"}
	}
	if !pathRE.MatchString(p) {
		return &cairn.Cause{Field: field, Message: fmt.Sprintf("%q must be dot-separated lowercase segments of [a-z0-9_-], e.g. cap.type.database.postgresql.config", p)}
	}
	return nil
}

func checkRevision(field, r string) *cairn.Cause {
	if r == "" {
		return &cairn.Cause{Field: field, Message: "is required"}
	}
	if !revisionRE.MatchString(r) {
		return &cairn.Cause{Field: field, Message: fmt.Sprintf("%q must be a semantic version, e.g. 0.1.0", r)}
	}
	return nil
}

func checkNamespace(ns string) *cairn.Cause {
	if len(ns) > 63 || !dnsLabelRE.MatchString(ns) {
		return &cairn.Cause{Field: "metadata/namespace", Message: fmt.Sprintf("%q must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending alphanumeric", ns)}
	}
	return nil
}

func checkName(name string) *cairn.Cause {
	if len(name) > 253 || !dnsSubdomainRE.MatchString(name) {
		return &cairn.Cause{Field: "metadata/name", Message: fmt.Sprintf("%q must be a DNS subdomain: at most 253 lowercase alphanumerics, '-' or '.', starting and ending alphanumeric", name)}
	}
	return nil
}

func checkAlias(alias string) *cairn.Cause {
	if len(alias) > 253 || !aliasRE.MatchString(alias) {
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
	// "core" is the Kubernetes core group (apiVersion v1: ConfigMap,
	// Secret, ...), which has no name of its own; a stack's rendered
	// children of those kinds are served under it.
	if t.Group != "core" && (t.Group == "" || len(t.Group) > 253 || !dnsSubdomainRE.MatchString(t.Group) || !strings.Contains(t.Group, ".")) {
		causes = append(causes, cairn.Cause{Field: "group", Message: fmt.Sprintf("%q must be a DNS subdomain with at least one dot, e.g. flipt.io, or core", t.Group)})
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
	if !dnsLabelRE.MatchString(t.Names.Plural) {
		causes = append(causes, cairn.Cause{Field: "names/plural", Message: fmt.Sprintf("%q must be a lowercase DNS label, e.g. flags", t.Names.Plural)})
	}
	if t.Names.Singular != "" && !dnsLabelRE.MatchString(t.Names.Singular) {
		causes = append(causes, cairn.Cause{Field: "names/singular", Message: fmt.Sprintf("%q must be a lowercase DNS label, e.g. flag", t.Names.Singular)})
	}
	for i, s := range t.Names.ShortNames {
		if !dnsLabelRE.MatchString(s) {
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
