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
	for _, rb := range p.RoleBindings {
		a.rbs[rb.Namespace] = append(a.rbs[rb.Namespace], rb)
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
			return Decision{true, `RBAC: allowed by ClusterRoleBinding "` + b.Name + `" of ClusterRole "` + b.RoleRef.Name + `"`}
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
				return Decision{true, `RBAC: allowed by RoleBinding "` + b.Name + `" of ` + b.RoleRef.Kind + ` "` + b.RoleRef.Name + `" in namespace "` + b.Namespace + `"`}
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
