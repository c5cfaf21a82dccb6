package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
)

// Names of the default roles and of the group the admin token belongs to.
const (
	AdminRole  = "cairn-admin"
	EditorRole = "cairn-editor"
	ViewerRole = "cairn-viewer"
	// GraphQLRole grants post and get on /graphql; it is bound to
	// system:authenticated.
	GraphQLRole = "cairn-graphql"
	// AdminsGroup is bound to cairn-admin by default.
	AdminsGroup = "cairn:admins"
)

// RevealVerb is the verb that shows secret values (a Type's fields marked
// x-cairn-secret, Terraform's sensitive outputs) in the clear: in an object
// read by name, its history, and lists and watches with ?values=true. get
// alone shows them replaced by a marker, so cairn-viewer, like Kubernetes'
// view role, which reads no Secrets, sees which credentials exist but not
// what they are; cairn-editor, like edit, reveals them.
const RevealVerb = "reveal"

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"get", "list", "watch", RevealVerb, "create", "update", "patch", "delete", "deletecollection"}
	// discoveryPaths are what kubectl reads before anything else.
	discoveryPaths = []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/"}
)

// HubGroup is cairn's own API group (types, typeinstances, backends, ...).
const HubGroup = "hub.cairn.dev"

// editorHubResources are the resources and subresources of HubGroup that
// cairn-editor grants, one by one: all that the REST API and GraphQL
// serve but backends/rotatekeys, re-encrypting a backend's files to other
// keys, which is key management and an admin's, as in Kubernetes (RBAC has
// no rule that excludes). A resource added to HubGroup is added here too,
// or editors do not get it (TestEditorHoldsTheHubResources in api/rest).
func editorHubResources() []string {
	return []string{
		"backends", "backends/check", "installs", "lockrequests", "plans", "policies", "policies/explain",
		"proposals", "stacks", "typeinstances", "typeinstances/resourceversions", "types",
	}
}

// accessGroups are the API groups of access control: RBAC objects, access
// reviews, who-am-I. Kubernetes' edit and view roles grant nothing in them
// (an editor who could write bindings could hand out what it holds to
// anyone, system:unauthenticated included, and revoke others' rights).
var accessGroups = []string{rbacv1.GroupName, "authorization.k8s.io", "authentication.k8s.io"}

// Reserved reports whether group is one no Type may claim: cairn's own
// group and the groups of access control, which cairn serves itself.
func Reserved(group string) bool {
	return group == HubGroup || slices.Contains(accessGroups, group)
}

// ServedGroups returns the API groups cairn-editor and cairn-viewer cover
// when Types serve extra (those of every Type, "core" as ""): the core
// group (namespaces), hub.cairn.dev and extra, sorted, without duplicates
// and without the reserved groups of access control.
func ServedGroups(extra ...string) []string {
	out := []string{"", HubGroup}
	for _, g := range extra {
		if g == "core" {
			g = ""
		}
		if !slices.Contains(accessGroups, g) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Defaults is the policy every server starts with: the three cairn roles,
// the Kubernetes API server's public-info, discovery and basic-user roles
// bound to everyone (authenticated or not, as there), and cairn:admins bound
// to cairn-admin. Bindings created through the API are added to it.
//
// groups are the API groups served besides cairn's own (those of the
// Types). cairn-editor and cairn-viewer list them one by one, rather than
// "*", because as in Kubernetes they grant nothing in the groups of access
// control (RBAC objects, access reviews), and RBAC has no rule that
// excludes: like an aggregated ClusterRole, their rules follow what is
// served.
func Defaults(groups ...string) Policy {
	served := ServedGroups(groups...)
	cr := func(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		return rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}}, Rules: rules}
	}
	crb := func(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects}
	}
	group := func(g string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g}
	}
	return Policy{
		ClusterRoles: []rbacv1.ClusterRole{
			cr(AdminRole,
				rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}),
			// An editor reads and writes every kind but RBAC objects and
			// cannot impersonate.
			cr(EditorRole,
				rbacv1.PolicyRule{APIGroups: slices.DeleteFunc(slices.Clone(served), func(g string) bool { return g == HubGroup }),
					Resources: []string{"*"}, Verbs: writeVerbs},
				rbacv1.PolicyRule{APIGroups: []string{HubGroup}, Resources: editorHubResources(), Verbs: writeVerbs},
				rbacv1.PolicyRule{NonResourceURLs: discoveryPaths, Verbs: []string{"get"}}),
			cr(ViewerRole,
				rbacv1.PolicyRule{APIGroups: slices.Clone(served), Resources: []string{"*"}, Verbs: readVerbs},
				rbacv1.PolicyRule{NonResourceURLs: discoveryPaths, Verbs: []string{"get"}}),
			cr("system:public-info-viewer",
				rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz", "/readyz", "/livez", "/version", "/version/"}, Verbs: []string{"get"}}),
			cr("system:discovery",
				rbacv1.PolicyRule{NonResourceURLs: discoveryPaths, Verbs: []string{"get"}}),
			// GraphQL authorizes each field as REST authorizes each
			// request; speaking to the endpoint is open to every
			// authenticated user, as discovery is.
			cr(GraphQLRole,
				rbacv1.PolicyRule{NonResourceURLs: []string{"/graphql"}, Verbs: []string{"get", "post"}}),
			cr("system:basic-user",
				rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
				rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}}),
		},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
			crb("cairn-admins", AdminRole, group(AdminsGroup)),
			crb("system:public-info-viewer", "system:public-info-viewer", group(cairn.Authenticated), group(cairn.Unauthenticated)),
			crb("system:discovery", "system:discovery", group(cairn.Authenticated)),
			crb("system:basic-user", "system:basic-user", group(cairn.Authenticated)),
			crb(GraphQLRole, GraphQLRole, group(cairn.Authenticated)),
		},
	}
}

// Merge returns p with the objects of q added.
func (p Policy) Merge(q Policy) Policy {
	return Policy{
		ClusterRoles:        append(append([]rbacv1.ClusterRole(nil), p.ClusterRoles...), q.ClusterRoles...),
		Roles:               append(append([]rbacv1.Role(nil), p.Roles...), q.Roles...),
		ClusterRoleBindings: append(append([]rbacv1.ClusterRoleBinding(nil), p.ClusterRoleBindings...), q.ClusterRoleBindings...),
		RoleBindings:        append(append([]rbacv1.RoleBinding(nil), p.RoleBindings...), q.RoleBindings...),
	}
}
