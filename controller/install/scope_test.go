package install_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/controller/install"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeTree writes files (path -> content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// addClusterPortalStacks adds cluster-portal, a cluster-scoped kind whose
// children go to the namespace portals and which depends on flags-env, and
// needs-portal, a namespaced kind that depends on cluster-portal (its
// dependency's lines mapping, if any, added).
func addClusterPortalStacks(t *testing.T, ctx context.Context, h *hub.Hub, mapping string) {
	t.Helper()
	m, err := os.ReadFile(repoPath("examples", "stacks", "team-portal", "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer("name: team-portal", "name: cluster-portal", "kind: TeamPortal", "kind: ClusterPortal",
		"plural: teamportals", "plural: clusterportals", "    categories: [stacks]", "    categories: [stacks]\n  scope: Cluster", "{kind: TeamPortal,", "{kind: ClusterPortal,").Replace(string(m))
	addTestStacks(t, ctx, h,
		writeTree(t, map[string]string{
			"stack.yaml":                   manifest,
			"resources/kustomization.yaml": "namespace: portals\nresources: [settings.yaml]\n",
			"resources/settings.yaml":      "apiVersion: portal.examples.cairn.dev/v1alpha1\nkind: PortalSettings\nmetadata: {name: settings}\nspec: {title: x}\n",
		}),
		writeTree(t, map[string]string{
			"stack.yaml": `name: needs-portal
version: 0.1.0
kind:
  group: examples.stacks.cairn.dev
  version: v1alpha1
  names: {kind: NeedsPortal}
dependencies:
  requires:
  - name: portal
    bundle: {reference: cluster-portal@0.1.0}
` + mapping,
			"resources/kustomization.yaml": "resources: [settings.yaml]\n",
			"resources/settings.yaml":      "apiVersion: portal.examples.cairn.dev/v1alpha1\nkind: PortalSettings\nmetadata: {name: needs}\nspec: {title: y}\n",
		}))
}

// A cluster-scoped installation resolves its dependencies as one of the
// global namespace: the namespaced ones it installs go to global. It is in
// turn a candidate of the global tier for any namespace's dependencies.
func TestClusterScopedInstallationDependencies(t *testing.T) {
	ctx, h := newHub(t)
	addClusterPortalStacks(t, ctx, h, "")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}

	// -n is ignored: the root has no namespace (its key is its name), its
	// flags go to global.
	p, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "cp", Stack: "cluster-portal", Parameters: map[string]any{"team": "data"}}, nil)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if p.Root != "cp" || p.Namespace != "" || len(res.Installed) != 2 || !slices.Contains(res.Installed, "cp") {
		t.Fatalf("plan root %q (namespace %q), installed %v; want cp without a namespace", p.Root, p.Namespace, res.Installed)
	}
	flags := nodeOf(p, "flags")
	if flags == nil || !strings.HasPrefix(flags.Key, "global/") {
		t.Fatalf("flags node %+v, want one in global", flags)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "ClusterPortal"), "", "cp", false)
	if err != nil {
		t.Fatal(err)
	}
	got := installations(t, ctx, h)
	if !slices.Contains(got, "/cp") || !slices.Contains(got, flags.Key) {
		t.Fatalf("installations %v, want /cp and %s", got, flags.Key)
	}
	// Installed again: the same root, nothing new.
	if _, res, err := svc.Install(ctx, install.Request{Name: "cp", Stack: "cluster-portal", Parameters: map[string]any{"team": "data"}}, nil); err != nil || len(res.Installed) != 0 {
		t.Fatalf("install again: %+v, %v", res, err)
	}

	// A namespaced installation in dev reuses it from the global tier.
	p2, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "n", Stack: "needs-portal"})
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p2, "portal"); n == nil || n.Action != deps.ActionReuse || n.Key != "cp" || n.Namespace != "" || n.InstallationID != root.ID {
		t.Fatalf("portal node %+v, want the reuse of cp (%s), which has no namespace", n, root.ID)
	}
}

// The stack controller installs the dependencies of a kubectl-written
// installation for no user: a cluster-scoped dependency, whose children go
// to namespaces its stack names (portals), is not created for a team that
// may write only in its own namespace; the condition says what to do.
func TestControllerWritesNoClusterScopedDependency(t *testing.T) {
	// Tried again soon after a failure, so the remedy is seen at once.
	ctx, h, _ := newHubWith(t, nil, func(d stackctl.Dependencies) stackctl.Dependencies {
		d.(*install.Runner).RetryAfter = 100 * time.Millisecond
		return d
	})
	addClusterPortalStacks(t, ctx, h, "    parameters: {team: data}\n")
	if _, err := h.CreateRBAC(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed-edits", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ed"}}}); err != nil {
		t.Fatal(err)
	}
	do := serveREST(t, h, "ed")
	const needs = "/apis/examples.stacks.cairn.dev/v1alpha1/namespaces/team-a/needsportals"
	if code, out := do("ed", "POST", needs, "application/json",
		`{"apiVersion":"examples.stacks.cairn.dev/v1alpha1","kind":"NeedsPortal","metadata":{"name":"n"},"spec":{}}`); code != http.StatusCreated {
		t.Fatalf("ed creates his installation: %d %s", code, out)
	}
	const want = "it writes no cluster-scoped installation (its stack writes outside team-a)"
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out := do("ed", "GET", needs+"/n", "", "")
		if code != http.StatusOK {
			t.Fatalf("ed reads his installation: %d %s", code, out)
		}
		if strings.Contains(out, want) {
			if !strings.Contains(out, `portal=global/ClusterPortal/NAME`) {
				t.Fatalf("the condition does not say how to name an existing one: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ed's installation %s, want a condition saying %q", out, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range installations(t, ctx, h) {
		if strings.HasPrefix(k, "/") {
			t.Fatalf("installations %v: a cluster-scoped one was created for ed", installations(t, ctx, h))
		}
	}

	// What the condition says to do: name an existing one (installed by
	// the infrastructure owner), with or without global/, in the
	// annotation; ed may read it, and the next try reuses it.
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, _, err := svc.Install(ctx, install.Request{Name: "shared", Stack: "cluster-portal", Parameters: map[string]any{"team": "data"}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, o := range []hub.RBACObject{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portal-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"examples.stacks.cairn.dev"}, Resources: []string{"clusterportals"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed-reads-portals"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portal-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ed"}}},
	} {
		if _, err := h.CreateRBAC(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	shared, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "ClusterPortal"), "", "shared", false)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []string{"portal=global/ClusterPortal/shared", "portal=ClusterPortal/shared"} {
		if code, out := do("ed", "PATCH", needs+"/n", "application/merge-patch+json",
			fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, hub.AnnotationDependencyOverrides, `["`+o+`"]`)); code != http.StatusOK {
			t.Fatalf("ed names %s in his installation's annotation: %d %s", o, code, out)
		}
		if i > 0 {
			continue // the first one installed it; the second is accepted
		}
		deadline = time.Now().Add(20 * time.Second)
		for {
			root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "NeedsPortal"), "team-a", "n", false)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(root.Uses, shared.ID) {
				break
			}
			if time.Now().After(deadline) {
				_, out := do("ed", "GET", needs+"/n", "", "")
				t.Fatalf("ed's installation does not use the named ClusterPortal shared: %s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// A namespaced root whose dependency is cluster-scoped: needs-portal (dev)
// -> cluster-portal (no namespace; its schema defaults team to platform)
// -> flags-env (global), mapped team: ${bundle.parameters.team}. The
// cluster-portal's own defaults reach the flags' mapping, the portal is
// keyed by its name alone in the plan, the install's events and the
// root's edges, and another namespace's plan finds it under that key.
func TestNewClusterScopedDependencyKeyedByName(t *testing.T) {
	ctx, h := newHub(t)
	addClusterPortalStacks(t, ctx, h, "")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	p, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "n", Stack: "needs-portal"})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	portal, flags := nodeOf(p, "portal"), nodeOf(p, "portal.flags")
	if portal == nil || portal.Namespace != "" || strings.Contains(portal.Key, "/") || portal.Key != portal.Name {
		t.Fatalf("portal node %+v, want one keyed by its name, without a namespace", portal)
	}
	if flags == nil || flags.Namespace != deps.DefaultGlobalNamespace || flags.Parameters["team"].Value != "platform" {
		t.Fatalf("flags node %+v, want one in global with team platform (cluster-portal's default)", flags)
	}
	var events []string
	var mu sync.Mutex
	if _, _, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "n", Stack: "needs-portal"}, func(e deps.Event) {
		mu.Lock()
		events = append(events, e.Node)
		mu.Unlock()
	}); err != nil {
		t.Fatalf("install: %v", err)
	}
	if !slices.Contains(events, portal.Key) || slices.ContainsFunc(events, func(k string) bool { return strings.HasSuffix(k, "/"+portal.Name) }) {
		t.Fatalf("events of %v, want %s without a namespace", events, portal.Key)
	}
	cp, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "ClusterPortal"), "", portal.Name, false)
	if err != nil {
		t.Fatalf("the cluster-scoped dependency: %v", err)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "NeedsPortal"), "dev", "n", false)
	if err != nil || !slices.Contains(root.Uses, cp.ID) {
		t.Fatalf("dev/n uses %v, want %s (%v)", root.Uses, cp.ID, err)
	}
	for _, ns := range []string{"dev", "team-b"} {
		p2, err := svc.Plan(ctx, install.Request{Namespace: ns, Name: "n", Stack: "needs-portal"})
		if err != nil {
			t.Fatal(err)
		}
		if n := nodeOf(p2, "portal"); n == nil || n.Key != portal.Key || n.Action != deps.ActionReuse || n.InstallationID != cp.ID {
			t.Fatalf("%s: portal node %+v, want the reuse of %s", ns, n, portal.Key)
		}
	}
}

// A cluster-scoped root's namespaced dependencies are resolved and
// installed in global, with the rights there of whoever installs it, as a
// namespaced root's in its own namespace: dana, who may create
// ClusterPortals (and their children) but nothing in global, is refused,
// the error naming the verb and the namespace; nothing is written. The
// stack controller, installing a kubectl-applied one for no user, creates
// nothing in global for it.
func TestClusterRootDependenciesNeedRightsInGlobal(t *testing.T) {
	ctx, h := newHub(t)
	addClusterPortalStacks(t, ctx, h, "")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	bind := func(name, ns, role string) hub.RBACObject {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dana"}}
		if ns == "" {
			return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subj}
		}
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subj}
	}
	create := func(objs ...hub.RBACObject) {
		t.Helper()
		for _, o := range objs {
			if _, err := h.CreateRBAC(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portal-admin"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"examples.stacks.cairn.dev"}, Resources: []string{"clusterportals"}, Verbs: []string{"*"}},
		{APIGroups: []string{"portal.examples.cairn.dev"}, Resources: []string{"*"}, Verbs: []string{"create"}},
	}}, bind("dana-portals", "", "portal-admin"))
	dana := cairn.WithUser(ctx, cairn.User{Name: "dana", Groups: []string{cairn.Authenticated}})
	before := installations(t, ctx, h)
	cp := install.Request{Name: "cp", Stack: "cluster-portal", Parameters: map[string]any{"team": "data"}}
	for _, c := range []struct{ grant, verb string }{{"", "get"}, {rbac.ViewerRole, "create"}} {
		if c.grant != "" {
			create(bind("dana-"+c.grant, "global", c.grant))
		}
		_, _, err := svc.Install(dana, cp, nil)
		want := fmt.Sprintf(`User "dana" cannot %s resource "flagsenvs" in API group "flags.stacks.cairn.dev" in the namespace "global"`, c.verb)
		if !cairn.HasCode(err, cairn.CodeForbidden) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cp is cluster-scoped: its namespaced dependencies are resolved and installed in global") {
			t.Fatalf("dana installs cp with %q in global: %v, want forbidden: %s, saying why global", c.grant, err, want)
		}
		if got := installations(t, ctx, h); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("a refused install wrote %v (had %v)", got, before)
		}
	}
	create(bind("dana-edits-global", "global", rbac.EditorRole))
	if _, res, err := svc.Install(dana, cp, nil); err != nil || len(res.Installed) != 2 {
		t.Fatalf("dana, who may edit global, installs cp: %+v, %v", res, err)
	}

	// Applied for no user: the controller creates no FlagsEnv in global
	// for it, and says so.
	do := serveREST(t, h, "dana")
	const portals = "/apis/examples.stacks.cairn.dev/v1alpha1/clusterportals"
	if code, out := do("dana", "POST", portals, "application/json",
		`{"apiVersion":"examples.stacks.cairn.dev/v1alpha1","kind":"ClusterPortal","metadata":{"name":"web"},"spec":{"team":"web"}}`); code != http.StatusCreated {
		t.Fatalf("dana applies a ClusterPortal: %d %s", code, out)
	}
	const want = `would be created or changed in the namespace global: web is cluster-scoped, so its namespaced dependencies go to global, and the stack controller installs them for no user`
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out := do("dana", "GET", portals+"/web", "", "")
		if strings.Contains(out, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the applied ClusterPortal web: %s, want a condition saying %q", out, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f := flagsEnvOf(t, ctx, h, "global", "web"); f.ID != "" {
		t.Fatalf("the controller created %s/%s for the applied ClusterPortal", f.Namespace, f.Name)
	}
}
