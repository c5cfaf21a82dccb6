package rest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/stack"
)

// clusterStack adds the stack controller's testdata/db to e's catalog with
// kind.scope: Cluster: its DB installations are cluster-scoped (seed 004).
func clusterStack(t *testing.T, e *restEnv) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(repoDir("controller", "stack", "testdata", "db"))); err != nil {
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
	s, err := stack.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.h.AddStack(e.ctx, archive); err != nil {
		t.Fatal(err)
	}
}

// TestClusterScopedOverREST serves a Cluster installation kind as the API
// server serves a cluster-scoped CustomResourceDefinition's objects.
func TestClusterScopedOverREST(t *testing.T) {
	e := newRestEnv(t)
	clusterStack(t, e)
	const gv = "/apis/db.test.cairn.dev/v1"

	if b := e.mustDo("GET", gv, "", nil, http.StatusOK).body; !strings.Contains(string(b), `"name":"dbs","singularName":"db","namespaced":false`) {
		t.Errorf("discovery: %s", b)
	}
	w := e.watch(gv + "/dbs")
	// A namespace in the body is cleared, as the API server clears it.
	created := decodeObj(t, e.mustDo("POST", gv+"/dbs", "application/json",
		`{"apiVersion":"db.test.cairn.dev/v1","kind":"DB","metadata":{"name":"small-infra","namespace":"crossplane-system","labels":{"foo-key":"bar-value"}},"spec":{}}`,
		http.StatusCreated))
	if created.Metadata.Namespace != "" || created.Metadata.Name != "small-infra" {
		t.Fatalf("created %s/%s, want no namespace", created.Metadata.Namespace, created.Metadata.Name)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", gv + "/dbs/small-infra", http.StatusOK},
		{"GET", gv + "/dbs/small-infra/status", http.StatusOK},
		{"GET", gv + "/dbs?labelSelector=foo-key%3Dbar-value", http.StatusOK},
		{"GET", gv + "/namespaces/default/dbs", http.StatusNotFound},
		{"GET", gv + "/namespaces/default/dbs/small-infra", http.StatusNotFound},
		{"POST", gv + "/namespaces/default/dbs", http.StatusNotFound},
	} {
		r := e.do(tc.method, tc.path, "application/json", `{"apiVersion":"db.test.cairn.dev/v1","kind":"DB","metadata":{"name":"x"}}`)
		if r.code != tc.want {
			t.Errorf("%s %s = %s, want %d", tc.method, tc.path, r, tc.want)
		}
	}
	if ev := w.expect("ADDED small-infra"); ev[0].obj.Metadata.Namespace != "" {
		t.Errorf("watch event in namespace %q", ev[0].obj.Metadata.Namespace)
	}
	l := decodeObj(t, e.get(gv+"/dbs"))
	if got := names(l); len(got) != 1 || got[0] != "small-infra" {
		t.Errorf("list = %v", got)
	}
	if b := e.get("/openapi/v3" + gv).body; !strings.Contains(string(b), `"/apis/db.test.cairn.dev/v1/dbs/{name}"`) || strings.Contains(string(b), "/namespaces/{namespace}/dbs") {
		t.Errorf("OpenAPI paths of dbs: %.400s", b)
	}
	// No namespace "" among the namespaces.
	if got := names(decodeObj(t, e.get("/api/v1/namespaces"))); slices.Contains(got, "") {
		t.Errorf("namespaces = %q: the empty namespace is no namespace", got)
	}
	e.mustDo("DELETE", gv+"/dbs/small-infra", "", nil, http.StatusOK)
}

// TestClusterScopedKubectl: kubectl's verbs on a cluster-scoped
// installation kind, with and without -n, and -A.
func TestClusterScopedKubectl(t *testing.T) {
	kubectl := findKubectl(t)
	e := newRestEnv(t)
	clusterStack(t, e)
	k := newKubectl(t, kubectl, e.url)

	if out := k.ok("api-resources", "--api-group", "db.test.cairn.dev", "--namespaced=false", "-o", "name"); strings.TrimSpace(out) != "dbs.db.test.cairn.dev" {
		t.Errorf("api-resources --namespaced=false = %q", out)
	}
	k.file("small.yaml", "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata:\n  name: small-infra\n  labels: {foo-key: bar-value}\nspec: {engine: mysql}\n")
	if out := k.ok("apply", "-f", "small.yaml"); !strings.Contains(out, "db.db.test.cairn.dev/small-infra created") {
		t.Errorf("apply = %q", out)
	}
	// Applied again with a namespace in the file: the same object (kubectl
	// and the server ignore it for a cluster-scoped kind).
	k.file("small-ns.yaml", "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata:\n  name: small-infra\n  namespace: crossplane-system\n  labels: {foo-key: bar-value}\nspec: {engine: postgres}\n")
	if out := k.ok("apply", "-f", "small-ns.yaml"); !strings.Contains(out, "db.db.test.cairn.dev/small-infra configured") {
		t.Errorf("apply with a namespace = %q", out)
	}
	for _, args := range [][]string{
		{"get", "dbs"},
		{"get", "dbs", "-n", "team-a"},
		{"get", "db", "small-infra"},
	} {
		if out := k.ok(args...); !strings.Contains(out, "small-infra") || strings.Contains(out, "NAMESPACE") {
			t.Errorf("kubectl %s = %q", strings.Join(args, " "), out)
		}
	}
	// The columns of a stack installation, as a CRD's
	// additionalPrinterColumns: NAME, READY, SYNCED (no condition yet:
	// empty), AGE; -A adds no NAMESPACE to a cluster-scoped kind; -o wide
	// adds the hub's columns.
	for args, header := range map[string]string{
		"get dbs":         "NAME READY SYNCED AGE",
		"get dbs -A":      "NAME READY SYNCED AGE",
		"get dbs -o wide": "NAME READY SYNCED AGE REVISION BACKEND LOCKED-BY",
	} {
		out := k.ok(strings.Fields(args)...)
		first, _, _ := strings.Cut(out, "\n")
		if got := strings.Join(strings.Fields(first), " "); got != header || !strings.Contains(out, "small-infra") {
			t.Errorf("kubectl %s header %q, want %q:\n%s", args, got, header, out)
		}
	}
	// explain describes what the stack controller reports in the status,
	// beside the hub's fields.
	if out := k.ok("explain", "dbs.status"); !strings.Contains(out, "conditions\t<[]Object>") || !strings.Contains(out, "outputs\t<map[string]Object>") ||
		!strings.Contains(out, "observedGeneration\t<integer>") || !strings.Contains(out, "typeRef\t<Object>") {
		t.Errorf("explain dbs.status:\n%s", out)
	}
	if out := k.ok("explain", "dbs.status.conditions"); !strings.Contains(out, "reason\t<string>") || !strings.Contains(out, "lastTransitionTime\t<string>") {
		t.Errorf("explain dbs.status.conditions:\n%s", out)
	}
	if out := k.ok("get", "db", "small-infra", "-o", "jsonpath={.metadata.namespace}|{.spec.engine}"); out != "|postgres" {
		t.Errorf("namespace|engine = %q, want |postgres", out)
	}
	if out := k.ok("describe", "db", "small-infra"); !strings.Contains(out, "Name:         small-infra") || strings.Contains(out, "Namespace:    default") {
		t.Errorf("describe = %q", out)
	}
	if out := k.ok("delete", "-f", "small-ns.yaml"); !strings.Contains(out, `db.db.test.cairn.dev "small-infra" deleted`) {
		t.Errorf("delete = %q", out)
	}
}

// TestKubectlConfigurationSetRefused: an installation that chooses a
// configuration set its stack does not have is refused by the hub naming
// the field and the sets (what to write), and nothing is created; one with
// a parameter the stack does not have, naming it and the known ones.
func TestKubectlConfigurationSetRefused(t *testing.T) {
	kubectl := findKubectl(t)
	e := newRestEnv(t)
	s, err := stack.Load(context.Background(), repoDir("examples", "stacks", "sql-env"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.h.AddStack(e.ctx, archive); err != nil {
		t.Fatal(err)
	}
	k := newKubectl(t, kubectl, e.url)
	k.file("staging.yaml", "apiVersion: sql.stacks.cairn.dev/v1alpha1\nkind: SQLEnv\nmetadata: {name: orders}\nspec: {region: us-west2, tier: staging}\n")
	k.fails([]string{`The SQLEnv "orders" is invalid: spec.tier: must be equal to one of the allowed values: "dev", "prod"`}, "apply", "-f", "staging.yaml")
	// A parameter the stack does not have is named, with those it has.
	k.file("zone.yaml", "apiVersion: sql.stacks.cairn.dev/v1alpha1\nkind: SQLEnv\nmetadata: {name: orders}\nspec: {region: us-west2, zone: a}\n")
	k.fails([]string{`The SQLEnv "orders" is invalid: spec: must NOT have additional properties: zone (known: region, tier)`}, "apply", "-f", "zone.yaml")
	if out, errOut, _ := k.run("get", "sqlenvs"); strings.Contains(out, "orders") || !strings.Contains(errOut, "No resources found") {
		t.Errorf("after the refusal, get sqlenvs = %q %q", out, errOut)
	}
}
