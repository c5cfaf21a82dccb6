package rest

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// TestEditorHoldsTheHubResources: cairn-editor lists the resources of
// hub.cairn.dev one by one (to leave out backends/rotatekeys), so every
// resource served there, with each verb discovery lists, and the read
// subresources must be among them; backends/rotatekeys is the admin's.
func TestEditorHoldsTheHubResources(t *testing.T) {
	var p rbac.Policy
	for _, b := range []struct{ user, role string }{{"ed", rbac.EditorRole}, {"ada", rbac.AdminRole}} {
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: b.user}}})
	}
	a := rbac.New(rbac.Defaults().Merge(p))
	may := func(user, verb, resource, sub string) bool {
		return a.Authorize(rbac.Attributes{User: cairn.User{Name: user, Groups: []string{cairn.Authenticated}}, Verb: verb,
			ResourceRequest: true, APIGroup: HubGroup, Resource: resource, Subresource: sub}).Allowed
	}
	for _, r := range hubResources() {
		if r.group != HubGroup {
			continue
		}
		for _, v := range r.verbs {
			if !may("ed", v, r.plural, "") {
				t.Errorf("cairn-editor may not %s %s", v, r.plural)
			}
		}
	}
	for _, s := range [][2]string{{"typeinstances", "resourceversions"}, {"backends", "check"}, {"policies", "explain"}} {
		if !may("ed", "get", s[0], s[1]) {
			t.Errorf("cairn-editor may not get %s/%s", s[0], s[1])
		}
	}
	if may("ed", "create", "backends", "rotatekeys") {
		t.Error("cairn-editor may rotate a backend's keys")
	}
	if !may("ada", "create", "backends", "rotatekeys") {
		t.Error("cairn-admin may not rotate a backend's keys")
	}
}
