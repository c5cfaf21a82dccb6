package install_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/controller/install"
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

	// -n is ignored: the root has no namespace, its flags go to global.
	p, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "cp", Stack: "cluster-portal", Parameters: map[string]any{"team": "data"}}, nil)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if p.Root != "global/cp" || len(res.Installed) != 2 {
		t.Fatalf("plan root %s, installed %v", p.Root, res.Installed)
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
	if n := nodeOf(p2, "portal"); n == nil || n.Action != deps.ActionReuse || n.Key != "global/cp" || n.InstallationID != root.ID {
		t.Fatalf("portal node %+v, want the reuse of global/cp (%s)", n, root.ID)
	}
}

// The stack controller installs the dependencies of a kubectl-written
// installation for no user: a cluster-scoped dependency, whose children go
// to namespaces its stack names (portals), is not created for a team that
// may write only in its own namespace; the condition says what to do.
func TestControllerWritesNoClusterScopedDependency(t *testing.T) {
	ctx, h := newHub(t)
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
}
