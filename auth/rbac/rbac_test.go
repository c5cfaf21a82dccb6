package rbac_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

const bindings = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: viewers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: vic, apiGroup: rbac.authorization.k8s.io}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: editors, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: Group, name: team-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: flag-reader, namespace: b}
rules:
- {apiGroups: [flipt.io], resources: [flags], resourceNames: [one], verbs: [get]}
- {apiGroups: [hub.cairn.dev], resources: [typeinstances/status], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: flag-reader, namespace: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: flag-reader}
subjects: [{kind: ServiceAccount, name: bot}]
`

func policy(t testing.TB) rbac.Policy {
	p := rbac.Defaults("flipt.io")
	for doc := range strings.SplitSeq(bindings, "\n---\n") {
		if err := p.Parse([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestAuthorize(t *testing.T) {
	a := rbac.New(policy(t))
	admin := cairn.User{Name: "admin", Groups: []string{rbac.AdminsGroup, cairn.Authenticated}}
	vic := cairn.User{Name: "vic", Groups: []string{cairn.Authenticated}}
	ed := cairn.User{Name: "ed", Groups: []string{"team-a", cairn.Authenticated}}
	bot := cairn.User{Name: "system:serviceaccount:b:bot", Groups: []string{cairn.Authenticated}}
	anon := cairn.User{Name: cairn.Anonymous, Groups: []string{cairn.Unauthenticated}}
	res := func(verb, group, resource, sub, ns, name string) rbac.Attributes {
		return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	path := func(verb, p string) rbac.Attributes { return rbac.Attributes{Verb: verb, Path: p} }
	ti := func(verb, ns string) rbac.Attributes { return res(verb, "hub.cairn.dev", "typeinstances", "", ns, "x") }
	for _, tc := range []struct {
		name  string
		user  cairn.User
		attrs rbac.Attributes
		want  bool
	}{
		{"admin creates anywhere", admin, ti("create", "z"), true},
		{"admin impersonates", admin, res("impersonate", "", "users", "", "", "jane"), true},
		{"admin reads metrics", admin, path("get", "/metrics"), true},
		{"viewer lists", vic, ti("list", ""), true},
		{"viewer gets in b", vic, ti("get", "b"), true},
		{"viewer cannot create", vic, ti("create", "a"), false},
		{"viewer cannot delete", vic, ti("delete", "a"), false},
		{"viewer cannot read metrics", vic, path("get", "/metrics"), false},
		{"editor of a creates in a", ed, ti("create", "a"), true},
		{"editor of a deletes in a", ed, ti("delete", "a"), true},
		{"editor of a cannot create in b", ed, ti("create", "b"), false},
		{"editor of a cannot list all namespaces", ed, ti("list", ""), false},
		{"editor cannot impersonate", ed, res("impersonate", "", "users", "", "a", "jane"), false},
		{"editor's role binding gives no paths", ed, path("get", "/metrics"), false},
		{"everyone authenticated discovers", ed, path("get", "/apis/hub.cairn.dev/v1"), true},
		{"anonymous cannot discover", anon, path("get", "/apis"), false},
		{"anonymous reads healthz", anon, path("get", "/healthz"), true},
		{"anonymous cannot list", anon, ti("list", ""), false},
		{"anonymous cannot create", anon, ti("create", "default"), false},
		{"authenticated may ask can-i", vic, res("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true},
		{"service account reads the named flag", bot, res("get", "flipt.io", "flags", "", "b", "one"), true},
		{"service account cannot read another flag", bot, res("get", "flipt.io", "flags", "", "b", "two"), false},
		{"service account of b has nothing in a", bot, res("get", "flipt.io", "flags", "", "a", "one"), false},
		{"subresource rule", bot, res("update", "hub.cairn.dev", "typeinstances", "status", "b", "x"), true},
		{"subresource rule is not the resource", bot, res("update", "hub.cairn.dev", "typeinstances", "", "b", "x"), false},
		{"editor of a writes flags in a", ed, res("create", "flipt.io", "flags", "", "a", "f"), true},
		{"viewer reads flags", vic, res("list", "flipt.io", "flags", "", "", ""), true},
		{"viewer reads namespaces", vic, res("list", "", "namespaces", "", "", ""), true},
		{"viewer cannot read a group that is not served", vic, res("list", "other.io", "things", "", "", ""), false},
		// As Kubernetes' edit and view: nothing of access control.
		{"editor cannot bind", ed, res("create", "rbac.authorization.k8s.io", "rolebindings", "", "a", "x"), false},
		{"editor cannot write roles", ed, res("update", "rbac.authorization.k8s.io", "roles", "", "a", "x"), false},
		{"editor cannot delete bindings", ed, res("delete", "rbac.authorization.k8s.io", "rolebindings", "", "a", "x"), false},
		{"editor cannot ask about others", ed, res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), false},
		{"viewer cannot list bindings", vic, res("list", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", ""), false},
		{"admin binds", admin, res("create", "rbac.authorization.k8s.io", "rolebindings", "", "a", "x"), true},
		{"masters are allowed all", cairn.User{Name: "m", Groups: []string{cairn.Masters}}, ti("delete", "q"), true},
	} {
		tc.attrs.User = tc.user
		d := a.Authorize(tc.attrs)
		if d.Allowed != tc.want {
			t.Errorf("%s: allowed %v, want %v (%s)", tc.name, d.Allowed, tc.want, d.Reason)
		}
		if d.Allowed && d.Reason == "" {
			t.Errorf("%s: allowed without a reason", tc.name)
		}
	}
}

func TestServedGroups(t *testing.T) {
	got := rbac.ServedGroups("flipt.io", "core", "rbac.authorization.k8s.io", "authorization.k8s.io", "authentication.k8s.io", "flipt.io", "a.io")
	if want := []string{"", "a.io", "flipt.io", "hub.cairn.dev"}; !slices.Equal(got, want) {
		t.Errorf("ServedGroups: %q, want %q", got, want)
	}
	for g, want := range map[string]bool{"hub.cairn.dev": true, "rbac.authorization.k8s.io": true, "authorization.k8s.io": true,
		"authentication.k8s.io": true, "flipt.io": false, "": false, "k8s.io": false} {
		if rbac.Reserved(g) != want {
			t.Errorf("Reserved(%q) = %v", g, !want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"apiVersion":"v1","kind":"Role"}`, `apiVersion "v1"`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Pod"}`, `kind "Pod"`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"}}`, "metadata.namespace is required"},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"apiGroups":[""],"resources":["x"]}]}`, "rules[0].verbs"},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"nonResourceURLs":["/x"],"verbs":["get"]}]}`, "only a ClusterRole may grant paths"},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"resources":["x"],"verbs":["get"]}]}`, "rules[0].apiGroups"},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["a/b/c"],"verbs":["get"]}]}`, `resources[0]: "a/b/c"`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"nonResourceURLs":["/a*b"],"verbs":["get"]}]}`, `nonResourceURLs[0]`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rulez":[]}`, `unknown field "rulez"`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}}`, "refers to a ClusterRole"},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},"subjects":[{"kind":"Robot","name":"x"}]}`, `subjects[0].kind "Robot"`},
		{`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r"},"subjects":[{"kind":"ServiceAccount","name":"x"}]}`, "subjects[0].namespace is required"},
	} {
		var p rbac.Policy
		err := p.Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.doc, err, tc.want)
		}
		if len(p.Roles)+len(p.ClusterRoles)+len(p.RoleBindings)+len(p.ClusterRoleBindings) != 0 {
			t.Errorf("%s: a refused object was added", tc.doc)
		}
	}
}

// FuzzParseRule parses arbitrary ClusterRoles and checks the evaluation's
// invariants on what was accepted: a rule never allows a verb it does not
// list (unless *), and never a path when it grants resources.
func FuzzParseRule(f *testing.F) {
	f.Add(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"apiGroups":["*"],"resources":["*/status"],"verbs":["get"]}]}`, "get", "typeinstances", "status", "/x")
	f.Add("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: [{nonResourceURLs: [/metrics*], verbs: [get]}]", "get", "", "", "/metrics/x")
	f.Add(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"apiGroups":[""],"resources":["x"],"resourceNames":["n"],"verbs":["*"]}]}`, "delete", "x", "", "")
	f.Fuzz(func(t *testing.T, doc, verb, resource, sub, path string) {
		var p rbac.Policy
		if err := p.Parse([]byte(doc)); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, cr := range p.ClusterRoles {
			for i := range cr.Rules {
				r := &cr.Rules[i]
				for _, rr := range []bool{true, false} {
					at := rbac.Attributes{Verb: verb, ResourceRequest: rr, APIGroup: "g", Resource: resource, Subresource: sub, Name: "n", Path: path}
					if !rbac.RuleAllows(r, at) {
						continue
					}
					if !contains(r.Verbs, "*") && !contains(r.Verbs, verb) {
						t.Fatalf("rule %+v allows verb %q", r, verb)
					}
					if rr && len(r.Resources) == 0 {
						t.Fatalf("rule %+v without resources allows a resource", r)
					}
					if !rr && len(r.NonResourceURLs) == 0 {
						t.Fatalf("rule %+v without nonResourceURLs allows path %q", r, path)
					}
				}
			}
		}
	})
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}
