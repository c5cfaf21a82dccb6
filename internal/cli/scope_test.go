package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clusterDBStack is the db test stack with kind.scope: Cluster, written
// under dir.
func clusterDBStack(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "cluster-db")
	if err := os.CopyFS(p, os.DirFS(dbStack)); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(p, "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m = []byte(strings.Replace(string(m), "names: {kind: DB, plural: dbs}", "names: {kind: DB, plural: dbs}\n  scope: Cluster", 1))
	if err := os.WriteFile(filepath.Join(p, "stack.yaml"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	// Its namespaced children go where the package says.
	k, err := os.ReadFile(filepath.Join(p, "resources", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "resources", "kustomization.yaml"), append([]byte("namespace: infra\n"), k...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClusterScopedCLI: the commands a user runs on a cluster-scoped
// installation, in both modes; -n is ignored as kubectl ignores it.
func TestClusterScopedCLI(t *testing.T) {
	for _, local := range []bool{true, false} {
		name := map[bool]string{true: "local", false: "client"}[local]
		t.Run(name, func(t *testing.T) {
			s := newFixture(t, local)
			dir := clusterDBStack(t, s.dir)
			// Rendered offline: the children where the package puts them,
			// whatever -n says.
			if out := s.ok("render", dir, "-n", "team-a"); strings.Contains(out, "team-a") || !strings.Contains(out, "namespace: infra") {
				t.Errorf("render = %s", out)
			}
			s.ok("stack", "add", dir)
			if out := s.ok("api-resources", "--namespaced=false"); !strings.Contains(out, "dbs") {
				t.Errorf("api-resources: %s", out)
			}
			f := writeFile(t, s.dir, "db.yaml", "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: small-infra, namespace: crossplane-system}\nspec: {}\n")
			if out := s.ok("apply", "-f", f); !strings.Contains(out, "db.db.test.cairn.dev/small-infra created") {
				t.Errorf("apply = %q", out)
			}
			for _, args := range [][]string{
				{"get", "dbs"},
				{"get", "dbs", "-n", "team-a"},
				{"get", "db", "small-infra", "-o", "name"},
				{"describe", "db", "small-infra"},
				{"describe", "dev.cairn.test.db.db", "small-infra"},
				{"get", "dev.cairn.test.db.db", "small-infra"},
				{"trace", "db/small-infra"},
				{"trace", "db/small-infra", "-n", "team-a"},
			} {
				if out := s.ok(args...); !strings.Contains(out, "small-infra") {
					t.Errorf("cairn %s = %q", strings.Join(args, " "), out)
				}
			}
			if local {
				// Local mode reconciles at once: the children are in infra.
				if out := s.ok("get", "databases", "-n", "infra"); !strings.Contains(out, "small-infra-main") {
					t.Errorf("get databases -n infra = %q", out)
				}
			}
			if out := s.ok("delete", "db", "small-infra"); !strings.Contains(out, `"small-infra" deleted`) {
				t.Errorf("delete = %q", out)
			}
		})
	}
}
