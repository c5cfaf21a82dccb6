// Package rbac decides requests with Kubernetes role-based access control,
// using the rbac.authorization.k8s.io/v1 kinds themselves: Roles and
// ClusterRoles hold rules, RoleBindings and ClusterRoleBindings give them to
// users, groups and service accounts. The evaluation follows the API
// server's: a request is allowed when any rule bound to the caller matches
// its verb, API group, resource, subresource and name (or, outside resources,
// its path); there are no deny rules.
package rbac

import (
	"slices"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn"
)

// Attributes describe one request, as the API server's authorizer sees it.
type Attributes struct {
	User cairn.User
	Verb string // get list watch create update patch delete deletecollection impersonate, or an HTTP verb for a path
	// ResourceRequest: a request for a resource (else for Path).
	ResourceRequest bool
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string // "" for cluster-scoped requests and requests across all namespaces
	Name            string
	Path            string
}

// Policy is the set of RBAC objects to evaluate.
type Policy struct {
	ClusterRoles        []rbacv1.ClusterRole
	Roles               []rbacv1.Role
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	RoleBindings        []rbacv1.RoleBinding
}

// Authorizer evaluates a Policy. It is immutable: build a new one when the
// policy changes (see Index).
type Authorizer struct {
	clusterRoles map[string][]rbacv1.PolicyRule
	roles        map[string][]rbacv1.PolicyRule // namespace/name
	crbs         []rbacv1.ClusterRoleBinding
	rbs          map[string][]rbacv1.RoleBinding // by namespace
	// The reasons an allowing binding gives, made once: crbReasons[i] is
	// crbs[i]'s, rbReasons[ns][i] is rbs[ns][i]'s.
	crbReasons []string
	rbReasons  map[string][]string
}

// New indexes p.
func New(p Policy) *Authorizer {
	a := &Authorizer{clusterRoles: map[string][]rbacv1.PolicyRule{}, roles: map[string][]rbacv1.PolicyRule{},
		rbs: map[string][]rbacv1.RoleBinding{}}
	for _, cr := range p.ClusterRoles {
		a.clusterRoles[cr.Name] = cr.Rules
	}
	for _, r := range p.Roles {
		a.roles[r.Namespace+"/"+r.Name] = r.Rules
	}
	a.crbs = p.ClusterRoleBindings
	for _, b := range a.crbs {
		a.crbReasons = append(a.crbReasons, `RBAC: allowed by ClusterRoleBinding "`+b.Name+`" of ClusterRole "`+b.RoleRef.Name+`"`)
	}
	a.rbReasons = map[string][]string{}
	for _, b := range p.RoleBindings {
		a.rbs[b.Namespace] = append(a.rbs[b.Namespace], b)
		a.rbReasons[b.Namespace] = append(a.rbReasons[b.Namespace],
			`RBAC: allowed by RoleBinding "`+b.Name+`" of `+b.RoleRef.Kind+` "`+b.RoleRef.Name+`" in namespace "`+b.Namespace+`"`)
	}
	return a
}

// Decision is an authorization answer with the reason, for audit and
// SubjectAccessReview status.
type Decision struct {
	Allowed bool
	Reason  string
}

// Authorize decides attrs.
func (a *Authorizer) Authorize(attrs Attributes) Decision {
	if slices.Contains(attrs.User.Groups, cairn.Masters) {
		return Decision{true, "group " + cairn.Masters}
	}
	for i := range a.crbs {
		b := &a.crbs[i]
		if b.RoleRef.Kind != "ClusterRole" || !appliesTo(b.Subjects, attrs.User, "") {
			continue
		}
		if rulesAllow(a.clusterRoles[b.RoleRef.Name], attrs) {
			return Decision{true, a.crbReasons[i]}
		}
	}
	if attrs.Namespace != "" {
		for i := range a.rbs[attrs.Namespace] {
			b := &a.rbs[attrs.Namespace][i]
			if !appliesTo(b.Subjects, attrs.User, b.Namespace) {
				continue
			}
			var rules []rbacv1.PolicyRule
			switch b.RoleRef.Kind {
			case "ClusterRole":
				rules = a.clusterRoles[b.RoleRef.Name]
			case "Role":
				rules = a.roles[b.Namespace+"/"+b.RoleRef.Name]
			}
			// A RoleBinding grants resources of its namespace, never paths.
			if attrs.ResourceRequest && rulesAllow(rules, attrs) {
				return Decision{true, a.rbReasons[attrs.Namespace][i]}
			}
		}
	}
	return Decision{false, ""}
}

func appliesTo(subjects []rbacv1.Subject, u cairn.User, bindingNS string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == u.Name {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.Groups, s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNS
			}
			if "system:serviceaccount:"+ns+":"+s.Name == u.Name {
				return true
			}
		}
	}
	return false
}

func rulesAllow(rules []rbacv1.PolicyRule, attrs Attributes) bool {
	for i := range rules {
		if RuleAllows(&rules[i], attrs) {
			return true
		}
	}
	return false
}

// RuleAllows reports whether one rule matches attrs.
func RuleAllows(r *rbacv1.PolicyRule, attrs Attributes) bool {
	if !matches(r.Verbs, attrs.Verb) {
		return false
	}
	if !attrs.ResourceRequest {
		for _, u := range r.NonResourceURLs {
			if u == "*" || u == attrs.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(attrs.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !matches(r.APIGroups, attrs.APIGroup) {
		return false
	}
	if !resourceMatches(r.Resources, attrs.Resource, attrs.Subresource) {
		return false
	}
	return len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, attrs.Name)
}

func matches(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

func resourceMatches(list []string, res, sub string) bool {
	full := res
	if sub != "" {
		full = res + "/" + sub
	}
	for _, r := range list {
		switch {
		case r == "*", r == full:
			return true
		case sub != "" && r == "*/"+sub:
			return true
		}
	}
	return false
}

// RoleRules returns the rules of the role a binding refers to: kind Role
// (in namespace) or ClusterRole; false when there is no such role.
func (a *Authorizer) RoleRules(kind, namespace, name string) ([]rbacv1.PolicyRule, bool) {
	switch kind {
	case "ClusterRole":
		r, ok := a.clusterRoles[name]
		return r, ok
	case "Role":
		r, ok := a.roles[namespace+"/"+name]
		return r, ok
	}
	return nil, false
}

// RulesFor returns every rule u holds in namespace ("" : at the cluster
// scope only), as the API server's escalation check collects them: the
// rules of the ClusterRoleBindings that apply to u, and of the RoleBindings
// of namespace without their paths (a RoleBinding grants no paths).
func (a *Authorizer) RulesFor(u cairn.User, namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	if slices.Contains(u.Groups, cairn.Masters) {
		return []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
		}
	}
	for i := range a.crbs {
		b := &a.crbs[i]
		if b.RoleRef.Kind == "ClusterRole" && appliesTo(b.Subjects, u, "") {
			out = append(out, a.clusterRoles[b.RoleRef.Name]...)
		}
	}
	if namespace == "" {
		return out
	}
	for i := range a.rbs[namespace] {
		b := &a.rbs[namespace][i]
		if !appliesTo(b.Subjects, u, b.Namespace) {
			continue
		}
		rules, _ := a.RoleRules(b.RoleRef.Kind, b.Namespace, b.RoleRef.Name)
		for _, r := range rules {
			if len(r.NonResourceURLs) == 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// Uncovered returns the parts of the servant rules that no owner rule
// grants, one verb, group, resource and name (or path) each: empty when
// the owner holds everything the servant rules grant. A wildcard in a
// servant rule is covered only by the same wildcard, so nobody grants
// "*" without holding "*". This is the check the API server makes before
// letting a user create a role or a binding (its rbac validation.Covers).
func Uncovered(owner, servant []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, s := range servant {
		for _, atom := range breakdown(s) {
			if !coveredByAny(owner, atom) {
				out = append(out, atom)
			}
		}
	}
	return out
}

// breakdown splits a rule into rules of one verb and one group, resource
// and name, or one verb and one path.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, v := range r.Verbs {
		for _, u := range r.NonResourceURLs {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, NonResourceURLs: []string{u}})
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if len(r.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{g}, Resources: []string{res}})
				}
				for _, n := range r.ResourceNames {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{g}, Resources: []string{res}, ResourceNames: []string{n}})
				}
			}
		}
	}
	return out
}

func coveredByAny(owner []rbacv1.PolicyRule, atom rbacv1.PolicyRule) bool {
	for i := range owner {
		if covers(&owner[i], &atom) {
			return true
		}
	}
	return false
}

// covers reports whether owner grants the single-valued rule atom.
func covers(owner, atom *rbacv1.PolicyRule) bool {
	if !matches(owner.Verbs, atom.Verbs[0]) {
		return false
	}
	if len(atom.NonResourceURLs) > 0 {
		u := atom.NonResourceURLs[0]
		for _, o := range owner.NonResourceURLs {
			if o == "*" || o == u || (strings.HasSuffix(o, "*") && strings.HasPrefix(u, strings.TrimSuffix(o, "*"))) {
				return true
			}
		}
		return false
	}
	if !matches(owner.APIGroups, atom.APIGroups[0]) {
		return false
	}
	res := atom.Resources[0]
	ok := false
	for _, o := range owner.Resources {
		if o == "*" || o == res {
			ok = true
			break
		}
		// "*/status" covers the status subresource of every resource.
		if _, sub, found := strings.Cut(res, "/"); found && o == "*/"+sub {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	if len(owner.ResourceNames) == 0 {
		return true
	}
	return len(atom.ResourceNames) == 1 && slices.Contains(owner.ResourceNames, atom.ResourceNames[0])
}

// FormatRules renders rules as the API server does in an escalation
// refusal: {APIGroups:["g"], Resources:["r"], Verbs:["v"]}.
func FormatRules(rules []rbacv1.PolicyRule) string {
	q := func(xs []string) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = strconv.Quote(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		if len(r.NonResourceURLs) > 0 {
			b.WriteString("NonResourceURLs:" + q(r.NonResourceURLs))
		} else {
			b.WriteString("APIGroups:" + q(r.APIGroups) + ", Resources:" + q(r.Resources))
			if len(r.ResourceNames) > 0 {
				b.WriteString(", ResourceNames:" + q(r.ResourceNames))
			}
		}
		b.WriteString(", Verbs:" + q(r.Verbs) + "}")
	}
	return b.String()
}
