package hub_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
)

// cairn-editor covers the group of a Type as soon as the Type exists, and
// never the groups of access control, which no Type may claim.
func TestEditorFollowsTypes(t *testing.T) {
	e := newEnv(t)
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.EditorRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "ed"}}}
	if _, err := e.h.CreateRBAC(e.ctx, bind); err != nil {
		t.Fatal(err)
	}
	ed := cairn.WithUser(context.Background(), cairn.User{Name: "ed", Groups: []string{cairn.Authenticated}})
	can := func(group, resource string) bool {
		return e.h.Authorize(ed, rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: group, Resource: resource, Namespace: "a"}).Allowed
	}
	if can("flipt.io", "flags") {
		t.Fatal("the editor may create flags before a Type serves them")
	}
	// A replica on the same store, started before the Type exists.
	replica, err := hub.New(e.ctx, hub.Config{Store: e.st, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names: &cairn.Names{Kind: "Flag", Plural: "flags"}}); err != nil {
		t.Fatal(err)
	}
	if !can("flipt.io", "flags") || !can("hub.cairn.dev", "typeinstances") {
		t.Error("the editor may not create flags or typeinstances once the Type exists")
	}
	// The replica learns of the group when a decision names it, access
	// reviews (kubectl auth can-i) included.
	edUser, _ := cairn.UserFrom(ed)
	review := rbac.Attributes{User: edUser, Verb: "create", ResourceRequest: true, APIGroup: "flipt.io", Resource: "flags", Namespace: "a"}
	deadline := time.Now().Add(5 * time.Second)
	for !replica.AuthorizeUser(context.Background(), review).Allowed {
		if time.Now().After(deadline) {
			t.Fatal("the replica does not let the editor create flags 5s after the Type was created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if can("rbac.authorization.k8s.io", "rolebindings") {
		t.Error("the editor may create role bindings")
	}
	roles, _, err := e.h.ListRBAC(e.ctx, hub.KindClusterRole, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range roles {
		if o.GetName() == rbac.EditorRole {
			// hub.cairn.dev in a rule of its own, resource by resource
			// (no backends/rotatekeys).
			rules := o.(*rbacv1.ClusterRole).Rules
			if got := rules[0].APIGroups; !slices.Equal(got, []string{"", "flipt.io"}) {
				t.Errorf("cairn-editor lists groups %q", got)
			}
			if got := rules[1]; !slices.Equal(got.APIGroups, []string{"hub.cairn.dev"}) || !slices.Contains(got.Resources, "typeinstances") || slices.Contains(got.Resources, "*") {
				t.Errorf("cairn-editor's rule of hub.cairn.dev %+v", got)
			}
		}
	}
	for _, g := range []string{"rbac.authorization.k8s.io", "authorization.k8s.io", "authentication.k8s.io", "hub.cairn.dev"} {
		_, err := e.h.CreateType(e.ctx, cairn.Type{Path: "io.x.role", Revision: "1.0.0", Group: g, Version: "v1",
			Names: &cairn.Names{Kind: "RoleBinding", Plural: "rolebindings"}})
		if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), `group "`+g+`" is reserved`) {
			t.Errorf("a Type in group %s: %v, want Invalid naming the reserved group", g, err)
		}
	}
}
