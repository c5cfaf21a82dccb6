package access_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const rbacTokens = `admin-token,root,1,cairn:admins
dana-token,dana,2
vic-token,vic,3
eve-token,eve,4
ed-token,ed,5
`

// vic views everything and ed edits everything (--rbac-file); the rest is
// created through the API.
const rbacFile = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vic-views}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: vic}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ed-edits}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: User, name: ed}]`

type rbacEnv struct {
	url    string
	client *http.Client
	caFile string
	dbPath string
	hub    *hub.Hub
}

// startRBAC serves a hub on a SQLite file over TLS behind the guard, with
// static tokens and the policy of rbacFile.
func startRBAC(t *testing.T) *rbacEnv {
	t.Helper()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "cairn.db")
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pol rbac.Policy
	for doc := range strings.SplitSeq(rbacFile, "\n---\n") {
		if err := pol.Parse([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := authn.ParseTokenFile(strings.NewReader(rbacTokens))
	if err != nil {
		t.Fatal(err)
	}
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h})
	mux := http.NewServeMux()
	g.Handle(mux)
	mux.Handle("/", rest.New(rest.Config{Hub: h}))
	srv := httptest.NewTLSServer(g.Wrap(mux))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &rbacEnv{url: srv.URL, client: srv.Client(), caFile: caFile, dbPath: dbPath, hub: h}
	if code, out := e.do(t, "admin-token", "POST", "/apis/hub.cairn.dev/v1/types", flagsRD); code != 201 {
		t.Fatalf("register flags: %d %s", code, out)
	}
	return e
}

func (e *rbacEnv) do(t *testing.T, token, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	ct := "application/json"
	if method == "PATCH" {
		ct = "application/strategic-merge-patch+json"
	}
	req.Header.Set("Content-Type", ct)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

const (
	rbacAPI = "/apis/rbac.authorization.k8s.io/v1"
	// nsEditor may do anything with flags, and manage role bindings, in
	// its namespace.
	nsEditor = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"ns-editor","namespace":"team-a"},
	 "rules":[{"apiGroups":["flipt.io"],"resources":["flags"],"verbs":["*"]},
	          {"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings"],"verbs":["create","get","list","delete"]}]}`
)

func binding(ns, name, kind, role, user string) string {
	return fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":%q,"namespace":%q},
	 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":%q,"name":%q},"subjects":[{"kind":"User","name":%q}]}`, name, ns, kind, role, user)
}

// TestRBACObjects is a table of RBAC writes and what they change, in order:
// who may write RBAC objects, the escalation check, read-only defaults and
// --rbac-file objects, validation, and decisions following at once.
func TestRBACObjects(t *testing.T) {
	e := startRBAC(t)
	for _, tc := range []struct {
		name, token, method, path, body string
		code                            int
		want                            string // in the answer
	}{
		{"dana cannot write before a binding", "dana-token", "POST", "/apis/flipt.io/v1/namespaces/team-a/flags", ti("team-a", "f0"), 403, `User \"dana\" cannot create resource \"flags\"`},
		{"a viewer cannot create roles", "vic-token", "POST", rbacAPI + "/namespaces/team-a/roles", nsEditor, 403, `cannot create resource \"roles\" in API group \"rbac.authorization.k8s.io\"`},
		// As Kubernetes' edit and view roles: nothing of access control.
		{"a viewer cannot list roles", "vic-token", "GET", rbacAPI + "/roles", "", 403, `User \"vic\" cannot list resource \"roles\"`},
		{"an editor writes flags anywhere", "ed-token", "POST", "/apis/flipt.io/v1/namespaces/team-z/flags", ti("team-z", "e0"), 201, `"createdBy":"ed"`},
		{"an editor cannot bind, even its own role", "ed-token", "POST", rbacAPI + "/namespaces/team-z/rolebindings", binding("team-z", "x", "ClusterRole", "cairn-editor", "system:unauthenticated"), 403, `User \"ed\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team-z\"`},
		{"an editor cannot create cluster roles", "ed-token", "POST", rbacAPI + "/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"mine"},"rules":[]}`, 403, `cannot create resource \"clusterroles\"`},
		{"an editor cannot ask about others", "ed-token", "POST", access.SubjectAccessReviewPath, `{"spec":{"user":"vic"}}`, 403, `cannot create resource \"subjectaccessreviews\"`},
		// Key management is an admin's, as in Kubernetes: cairn-editor
		// lists hub.cairn.dev's resources without backends/rotatekeys.
		{"an editor cannot rotate a backend's keys", "ed-token", "POST", "/apis/hub.cairn.dev/v1/backends/" + cairn.BuiltinBackendID + "/rotatekeys", `{"spec":{"addAge":["x"]}}`, 403,
			`User \"ed\" cannot create resource \"backends/rotatekeys\" in API group \"hub.cairn.dev\"`},
		{"an editor checks a backend", "ed-token", "GET", "/apis/hub.cairn.dev/v1/backends/" + cairn.BuiltinBackendID + "/check", "", 200, ""},
		{"an editor reads a history", "ed-token", "GET", "/apis/hub.cairn.dev/v1/typeinstances/nope/resourceversions", "", 404, ""},
		{"an editor asks the policy", "ed-token", "GET", "/apis/hub.cairn.dev/v1/policies/default/explain?path=io.flipt.flag", "", 200, ""},
		{"an admin rotates keys (the built-in backend has none)", "admin-token", "POST", "/apis/hub.cairn.dev/v1/backends/" + cairn.BuiltinBackendID + "/rotatekeys", `{"spec":{"addAge":["x"]}}`, 422, "does not encrypt with rotatable keys"},
		{"anonymous cannot list roles", "", "GET", rbacAPI + "/roles", "", 403, "forbidden"},
		{"admin creates the role", "admin-token", "POST", rbacAPI + "/namespaces/team-a/roles", nsEditor, 201, `"resourceVersion":"1"`},
		{"the same role again", "admin-token", "POST", rbacAPI + "/namespaces/team-a/roles", nsEditor, 409, `roles.rbac.authorization.k8s.io \"ns-editor\" already exists`},
		{"admin binds it to dana", "admin-token", "POST", rbacAPI + "/namespaces/team-a/rolebindings", binding("team-a", "dana-edits", "Role", "ns-editor", "dana"), 201, `"name":"dana-edits"`},
		{"dana writes in team-a", "dana-token", "POST", "/apis/flipt.io/v1/namespaces/team-a/flags", ti("team-a", "f1"), 201, `"createdBy":"dana"`},
		{"dana cannot write in team-b", "dana-token", "POST", "/apis/flipt.io/v1/namespaces/team-b/flags", ti("team-b", "f1"), 403, `in the namespace \"team-b\"`},
		{"dana grants her role to eve", "dana-token", "POST", rbacAPI + "/namespaces/team-a/rolebindings", binding("team-a", "eve-edits", "Role", "ns-editor", "eve"), 201, `"name":"eve-edits"`},
		{"eve writes in team-a", "eve-token", "POST", "/apis/flipt.io/v1/namespaces/team-a/flags", ti("team-a", "f2"), 201, ""},
		{"dana cannot grant cairn-admin (escalation)", "dana-token", "POST", rbacAPI + "/namespaces/team-a/rolebindings", binding("team-a", "eve-admin", "ClusterRole", "cairn-admin", "eve"), 403,
			`rolebindings.rbac.authorization.k8s.io \"eve-admin\" is forbidden: user \"dana\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held`},
		{"dana cannot bind a missing role", "dana-token", "POST", rbacAPI + "/namespaces/team-a/rolebindings", binding("team-a", "ghost", "Role", "ghost", "eve"), 403, `roleRef Role \"ghost\" was not found`},
		{"dana cannot bind in team-b", "dana-token", "POST", rbacAPI + "/namespaces/team-b/rolebindings", binding("team-b", "x", "ClusterRole", "cairn-viewer", "eve"), 403, `cannot create resource \"rolebindings\"`},
		{"admin may bind a missing role", "admin-token", "POST", rbacAPI + "/namespaces/team-a/rolebindings", binding("team-a", "later", "Role", "later", "eve"), 201, ""},
		{"namespace of body and URL differ", "admin-token", "POST", rbacAPI + "/namespaces/team-b/rolebindings", binding("team-a", "x", "Role", "ns-editor", "eve"), 400, "does not match the namespace sent on the request"},
		{"a rule without verbs", "admin-token", "POST", rbacAPI + "/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"bad"},"rules":[{"apiGroups":[""],"resources":["x"]}]}`, 422, `"message":"clusterroles.rbac.authorization.k8s.io \"bad\" is invalid: rules[0].verbs: at least one verb is required"`},
		{"an unknown field under Strict", "admin-token", "POST", rbacAPI + "/clusterroles?fieldValidation=Strict", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"typo"},"rulez":[]}`, 400, `unknown field \"rulez\"`},
		{"a Role body at the ClusterRole URL", "admin-token", "POST", rbacAPI + "/clusterroles", nsEditor, 400, "not a ClusterRole"},
		{"defaults are listed", "admin-token", "GET", rbacAPI + "/clusterroles", "", 200, `"hub.cairn.dev/rbac-source":"default"`},
		{"--rbac-file objects are listed", "admin-token", "GET", rbacAPI + "/clusterrolebindings/vic-views", "", 200, `"hub.cairn.dev/rbac-source":"rbac-file"`},
		{"a default role is read-only", "admin-token", "PATCH", rbacAPI + "/clusterroles/cairn-viewer", `{"rules":[]}`, 403, "is read-only: it is one of the hub's default roles"},
		{"an --rbac-file binding is read-only", "admin-token", "DELETE", rbacAPI + "/clusterrolebindings/vic-views", "", 403, "cairn serve --rbac-file"},
		{"a default name is taken", "admin-token", "POST", rbacAPI + "/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"cairn-admin"},"rules":[]}`, 409, "already exists"},
		{"roleRef cannot change", "admin-token", "PATCH", rbacAPI + "/namespaces/team-a/rolebindings/eve-edits", `{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cairn-admin"}}`, 422, "cannot change roleRef"},
		{"a patch adds a label", "admin-token", "PATCH", rbacAPI + "/namespaces/team-a/roles/ns-editor", `{"metadata":{"labels":{"team":"a"}}}`, 200, `"team":"a"`},
		{"a stale resourceVersion", "admin-token", "PUT", rbacAPI + "/namespaces/team-a/roles/ns-editor", strings.Replace(nsEditor, `"namespace":"team-a"}`, `"namespace":"team-a","resourceVersion":"1"}`, 1), 409, "the object has been modified"},
		{"a label selector", "admin-token", "GET", rbacAPI + "/roles?labelSelector=team%3Da", "", 200, `"name":"ns-editor"`},
		{"the RBAC instance is not a TypeInstance to write", "admin-token", "DELETE", "/apis/hub.cairn.dev/v1/typeinstances/" + hub.RBACID, "", 403, "holds the hub's RBAC objects"},
		{"an editor cannot delete bindings", "ed-token", "DELETE", rbacAPI + "/namespaces/team-a/rolebindings/dana-edits", "", 403, `cannot delete resource \"rolebindings\"`},
		{"dana's binding goes", "admin-token", "DELETE", rbacAPI + "/namespaces/team-a/rolebindings/dana-edits", "", 200, `"status":"Success"`},
		{"and with it her right, at once", "dana-token", "POST", "/apis/flipt.io/v1/namespaces/team-a/flags", ti("team-a", "f3"), 403, "forbidden"},
		{"a deleted binding is gone", "admin-token", "GET", rbacAPI + "/namespaces/team-a/rolebindings/dana-edits", "", 404, `rolebindings.rbac.authorization.k8s.io \"dana-edits\" not found`},
	} {
		code, out := e.do(t, tc.token, tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %.400s\nwant %d with %s", tc.name, code, out, tc.code, tc.want)
		}
	}

	// The objects survive a restart and are shared by another hub on the
	// same database (a replica), which sees a change within its poll
	// interval.
	st2, err := sqlite.Open(context.Background(), e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	h2, err := hub.New(context.Background(), hub.Config{Store: st2, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eve := cairn.WithUser(context.Background(), cairn.User{Name: "eve", Groups: []string{cairn.Authenticated}})
	create := func(ns string) rbac.Attributes {
		return rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: "flipt.io", Resource: "flags", Namespace: ns}
	}
	if !h2.Authorize(eve, create("team-a")).Allowed || h2.Authorize(eve, create("team-b")).Allowed {
		t.Error("after a restart: eve's binding in team-a is not what it was")
	}
	if code, out := e.do(t, "admin-token", "POST", rbacAPI+"/namespaces/team-b/rolebindings", binding("team-b", "eve-b", "ClusterRole", "cairn-editor", "eve")); code != 201 {
		t.Fatalf("bind eve in team-b: %d %s", code, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !h2.Authorize(eve, create("team-b")).Allowed {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not see the new binding within 5s (poll interval 50ms)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	list, _, err := h2.ListRBAC(context.Background(), hub.KindRoleBinding, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range list {
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}
	if got := strings.Join(names, " "); got != "team-a/eve-edits team-a/later team-b/eve-b" {
		t.Errorf("the replica lists role bindings %q", got)
	}
}

// TestRBACKubectl: an admin creates a namespace-editor role and binds it to
// a token user with the real kubectl over TLS; the user can then write in
// that namespace and not another, and kubectl auth can-i says so.
func TestRBACKubectl(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	e := startRBAC(t)
	home := t.TempDir()
	kc := func(token string) string {
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, e.url, e.caFile, token)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin, dana := kc("admin-token"), kc("dana-token")
	k := func(cfg string, args ...string) (string, error) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", cfg}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dir := t.TempDir()
	flag := func(ns, name string) string {
		p := filepath.Join(dir, ns+name+".yaml")
		os.WriteFile(p, []byte(fmt.Sprintf("apiVersion: flipt.io/v1\nkind: Flag\nmetadata: {name: %s, namespace: %s}\nspec: {description: d}\n", name, ns)), 0o600)
		return p
	}
	rbacYAML := filepath.Join(dir, "rbac.yaml")
	os.WriteFile(rbacYAML, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flag-reader}
rules: [{apiGroups: [flipt.io], resources: [flags], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dana-reads-flags}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flag-reader}
subjects: [{kind: User, name: dana}]
`), 0o600)
	for _, step := range []struct {
		cfg  string
		args []string
		ok   bool
		want string
	}{
		{dana, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "team-a"}, false, "no"},
		{admin, []string{"create", "role", "ns-editor", "-n", "team-a", "--verb=get,list,create,update,patch,delete", "--resource=flags.flipt.io"}, true, "role.rbac.authorization.k8s.io/ns-editor created"},
		{admin, []string{"create", "rolebinding", "dana-edits", "-n", "team-a", "--role=ns-editor", "--user=dana"}, true, "rolebinding.rbac.authorization.k8s.io/dana-edits created"},
		{dana, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "team-a"}, true, "yes"},
		{dana, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "team-b"}, false, "no"},
		{dana, []string{"apply", "-f", flag("team-a", "f1")}, true, "flag.flipt.io/f1 created"},
		{dana, []string{"apply", "-f", flag("team-b", "f1")}, false, `User "dana" cannot`},
		{dana, []string{"create", "rolebinding", "grab", "-n", "team-a", "--clusterrole=cairn-admin", "--user=dana"}, false, "forbidden"},
		{admin, []string{"get", "roles", "-n", "team-a"}, true, "ns-editor"},
		{admin, []string{"get", "rolebindings", "-n", "team-a", "-o", "wide"}, true, "Role/ns-editor"},
		{admin, []string{"get", "clusterroles"}, true, "cairn-editor"},
		{admin, []string{"create", "clusterrolebinding", "dana-views", "--clusterrole=cairn-viewer", "--user=dana"}, true, "created"},
		{dana, []string{"auth", "can-i", "list", "flags.flipt.io", "-n", "team-b"}, true, "yes"},
		{admin, []string{"delete", "clusterrolebinding", "dana-views"}, true, `"dana-views" deleted`},
		{dana, []string{"auth", "can-i", "list", "flags.flipt.io", "-n", "team-b"}, false, "no"},
		{admin, []string{"apply", "-f", rbacYAML}, true, "clusterrolebinding.rbac.authorization.k8s.io/dana-reads-flags created"},
		{admin, []string{"apply", "-f", rbacYAML}, true, "clusterrole.rbac.authorization.k8s.io/flag-reader unchanged"},
		{dana, []string{"get", "flags.flipt.io", "-n", "team-b"}, true, "No resources found"},
		{admin, []string{"delete", "-f", rbacYAML}, true, `"dana-reads-flags" deleted`},
		{admin, []string{"delete", "clusterrole", "cairn-admin"}, false, "read-only"},
		{admin, []string{"delete", "rolebinding", "dana-edits", "-n", "team-a"}, true, "deleted"},
		{dana, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "team-a"}, false, "no"},
	} {
		out, err := k(step.cfg, step.args...)
		if (err == nil) != step.ok || !strings.Contains(out, step.want) {
			t.Errorf("kubectl %s: %v\n%s\nwant ok=%v and %q", strings.Join(step.args, " "), err, out, step.ok, step.want)
		}
	}
}

// TestRBACClusterScopedKubectl: a cluster-scoped installation kind (stack.yaml
// kind.scope: Cluster) is granted as Kubernetes grants a cluster-scoped
// resource: by a ClusterRole bound by a ClusterRoleBinding, never by a
// RoleBinding, whatever role it binds.
func TestRBACClusterScopedKubectl(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	e := startRBAC(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "controller", "stack", "testdata", "db"))); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m = []byte(strings.Replace(string(m), "names: {kind: DB, plural: dbs}", "names: {kind: DB, plural: dbs}\n  scope: Cluster", 1))
	if err := os.WriteFile(filepath.Join(dir, "stack.yaml"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	// Its children go to namespace infra.
	k, err := os.ReadFile(filepath.Join(dir, "resources", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resources", "kustomization.yaml"), append([]byte("namespace: infra\n"), k...), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Load(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hub.AddStack(t.Context(), archive); err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	kc := func(token string) string {
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]
current-context: c
`, e.url, e.caFile, token)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin, dana := kc("admin-token"), kc("dana-token")
	db := filepath.Join(t.TempDir(), "db.yaml")
	if err := os.WriteFile(db, []byte("apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: small-infra}\nspec: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// kubectl create clusterrole wants the kinds served: they are not yet.
	children := filepath.Join(t.TempDir(), "children.yaml")
	if err := os.WriteFile(children, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: db-children}
rules: [{apiGroups: [example.org], resources: [databases, buckets], verbs: [create, get, list, update, delete]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		cfg  string
		args []string
		ok   bool
		want string
	}{
		{admin, []string{"create", "clusterrole", "db-admin", "--verb=*", "--resource=dbs.db.test.cairn.dev"}, true, "created"},
		// Bound in team-a (the context's namespace): grants nothing here.
		{admin, []string{"create", "rolebinding", "dana-dbs", "-n", "team-a", "--clusterrole=db-admin", "--user=dana"}, true, "created"},
		// -A: kubectl asks in the context's namespace otherwise (and warns
		// that dbs are not namespaced), where the RoleBinding answers.
		{dana, []string{"auth", "can-i", "create", "dbs.db.test.cairn.dev", "-A"}, false, "no"},
		{dana, []string{"apply", "-f", db}, false, `cannot get resource "dbs" in API group "db.test.cairn.dev" at the cluster scope`},
		{dana, []string{"get", "dbs"}, false, `cannot list resource "dbs" in API group "db.test.cairn.dev" at the cluster scope`},
		{admin, []string{"create", "clusterrolebinding", "dana-dbs", "--clusterrole=db-admin", "--user=dana"}, true, "created"},
		{dana, []string{"auth", "can-i", "create", "dbs.db.test.cairn.dev", "-A"}, true, "yes"},
		// The stack writes a Database and a Bucket in infra, where dana may
		// create neither: the installation is refused, nothing written.
		{dana, []string{"apply", "-f", db}, false, `is forbidden: User "dana" cannot create resource "buckets" in API group "example.org" in the namespace "infra"`},
		{admin, []string{"apply", "-f", children}, true, "clusterrole.rbac.authorization.k8s.io/db-children created"},
		{admin, []string{"create", "rolebinding", "dana-children", "-n", "infra", "--clusterrole=db-children", "--user=dana"}, true, "created"},
		{dana, []string{"apply", "-f", db}, true, "db.db.test.cairn.dev/small-infra created"},
		{dana, []string{"get", "dbs", "-A"}, true, "small-infra"},
		{dana, []string{"delete", "db", "small-infra"}, true, `"small-infra" deleted`},
	} {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", step.cfg}, step.args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if (err == nil) != step.ok || !strings.Contains(string(out), step.want) {
			t.Errorf("kubectl %s: %v\n%s\nwant ok=%v and %q", strings.Join(step.args, " "), err, out, step.ok, step.want)
		}
	}
}
