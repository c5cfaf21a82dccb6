package graphql_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// TestClusterScopedInstances: an instance of a Cluster Type (a stack's
// cluster-scoped installation kind) has no namespace over GraphQL, and is
// granted as REST grants it: at the cluster scope, never by a RoleBinding,
// not even one in the namespace default.
func TestClusterScopedInstances(t *testing.T) {
	g := startGuarded(t)
	ctx := context.Background()
	env := cairn.TypeRef{Path: "dev.cairn.test.env", Revision: "1.0.0"}
	if _, err := g.h.CreateType(ctx, cairn.Type{Path: env.Path, Revision: env.Revision, Group: "test.cairn.dev", Version: "v1",
		Names: &cairn.Names{Kind: "Env", Plural: "envs"}, JSONSchema: json.RawMessage(`{"type":"object","x-cairn-scope":"Cluster"}`)}); err != nil {
		t.Fatal(err)
	}
	// ed edits namespace a (authzRBAC), and here default too.
	if _, err := g.h.CreateRBAC(ctx, &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "editors", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cairn-editor"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "ed"}}}); err != nil {
		t.Fatal(err)
	}
	seed, err := g.h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "small", TypeRef: env, Value: json.RawMessage(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := seed[0].ID
	create := `mutation { createTypeInstance(in: {typeRef: {path: "dev.cairn.test.env", revision: "1.0.0"}, name: "big", value: {}}) }`
	for _, tc := range []struct {
		name, token, query string
		want               string // in the data, or in the errors when it starts with "error: "
	}{
		{"admin reads it", "admin-token", `{ typeInstance(id: "` + id + `") { namespace name } }`, `{"typeInstance":{"namespace":"","name":"small"}}`},
		{"a viewer (ClusterRoleBinding) reads it", "viewer-token", `{ typeInstance(id: "` + id + `") { namespace } }`, `{"typeInstance":{"namespace":""}}`},
		{"an editor of default may not read it", "editor-token", `{ typeInstance(id: "` + id + `") { namespace } }`,
			`error: typeinstances.hub.cairn.dev "` + id + `" is forbidden: User "ed" cannot get resource "typeinstances" in API group "hub.cairn.dev" at the cluster scope`},
		{"nor create one", "editor-token", create,
			`error: User "ed" cannot create resource "typeinstances" in API group "hub.cairn.dev" at the cluster scope`},
		{"admin creates one without a namespace", "admin-token", create, `"createTypeInstance":"`},
		{"a namespace is refused", "admin-token", `mutation { createTypeInstance(in: {typeRef: {path: "dev.cairn.test.env", revision: "1.0.0"}, namespace: "a", name: "c", value: {}}) }`,
			`error: Env is cluster-scoped: its objects have no namespace`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res := g.post(t, tc.token, tc.query)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if !strings.Contains(errText(res), want) {
					t.Errorf("errors %q, want %q", errText(res), want)
				}
				return
			}
			if len(res.Errors) > 0 || !strings.Contains(string(res.Data), tc.want) {
				t.Errorf("data %s, errors %q; want %s", res.Data, errText(res), tc.want)
			}
		})
	}
}
