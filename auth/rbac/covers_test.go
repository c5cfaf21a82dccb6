package rbac_test

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

func TestUncovered(t *testing.T) {
	rule := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(x ...string) []string { return x }
	owner := []rbacv1.PolicyRule{
		rule(s("get", "list"), s("flipt.io"), s("flags"), nil),
		rule(s("update"), s("flipt.io"), s("flags"), s("one")),
		rule(s("get"), s("*"), s("*/status"), nil),
		{Verbs: s("get"), NonResourceURLs: s("/apis/*")},
	}
	for _, tc := range []struct {
		name    string
		servant []rbacv1.PolicyRule
		missing int
	}{
		{"the same rule", []rbacv1.PolicyRule{rule(s("get", "list"), s("flipt.io"), s("flags"), nil)}, 0},
		{"a narrower name", []rbacv1.PolicyRule{rule(s("get"), s("flipt.io"), s("flags"), s("x"))}, 0},
		{"a verb more", []rbacv1.PolicyRule{rule(s("get", "delete"), s("flipt.io"), s("flags"), nil)}, 1},
		{"a wildcard verb is not covered by a list", []rbacv1.PolicyRule{rule(s("*"), s("flipt.io"), s("flags"), nil)}, 1},
		{"a name the owner has", []rbacv1.PolicyRule{rule(s("update"), s("flipt.io"), s("flags"), s("one"))}, 0},
		{"every name when the owner has one", []rbacv1.PolicyRule{rule(s("update"), s("flipt.io"), s("flags"), nil)}, 1},
		{"a status subresource", []rbacv1.PolicyRule{rule(s("get"), s("x.io"), s("things/status"), nil)}, 0},
		{"another group", []rbacv1.PolicyRule{rule(s("get"), s("other.io", "flipt.io"), s("flags"), nil)}, 1},
		{"a path under a prefix", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis/x")}}, 0},
		{"a path outside", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/metrics")}}, 1},
		{"nothing", nil, 0},
	} {
		if got := rbac.Uncovered(owner, tc.servant); len(got) != tc.missing {
			t.Errorf("%s: uncovered %s, want %d rules", tc.name, rbac.FormatRules(got), tc.missing)
		}
	}
	got := rbac.FormatRules(rbac.Uncovered(owner, []rbacv1.PolicyRule{rule(s("delete"), s("flipt.io"), s("flags"), nil)}))
	if got != `{APIGroups:["flipt.io"], Resources:["flags"], Verbs:["delete"]}` {
		t.Errorf("FormatRules: %s", got)
	}
}

func TestRulesFor(t *testing.T) {
	p := rbac.Defaults("x.io")
	if err := p.Parse([]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"a"},
	  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cairn-viewer"},"subjects":[{"kind":"User","name":"ed"}]}`)); err != nil {
		t.Fatal(err)
	}
	a := rbac.New(p)
	ed := cairn.User{Name: "ed", Groups: []string{cairn.Authenticated}}
	read := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"x.io"}, Resources: []string{"things"}}}
	if len(rbac.Uncovered(a.RulesFor(ed, "a"), read)) != 0 {
		t.Error("ed holds get in namespace a through the RoleBinding")
	}
	if len(rbac.Uncovered(a.RulesFor(ed, "b"), read)) == 0 {
		t.Error("ed holds nothing in namespace b")
	}
	// cairn-viewer grants discovery paths too; a RoleBinding does not.
	paths := []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/openapi/v3"}}}
	if len(rbac.Uncovered(a.RulesFor(cairn.User{Name: "ed"}, "a"), paths)) == 0 {
		t.Error("a RoleBinding granted paths")
	}
	if rules, ok := a.RoleRules("ClusterRole", "", rbac.ViewerRole); !ok || len(rules) == 0 {
		t.Error("RoleRules of cairn-viewer")
	}
	if _, ok := a.RoleRules("Role", "a", "nope"); ok {
		t.Error("RoleRules of a missing Role")
	}
}
