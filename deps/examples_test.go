package deps

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/stack"
)

// The example stacks, loaded by package stack: reporting's interface-only
// dependency is satisfied by an unmanaged shared-sql-server installation,
// and its flags-env dependency is created once per namespace and team.
func TestExampleStacks(t *testing.T) {
	ctx := context.Background()
	cat := catalog(t)
	byName := map[string]*Stack{}
	for _, dir := range []string{"shared-sql-server", "reporting", "flags-env", "minimal-gcp"} {
		st, err := stack.Load(ctx, exampleDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		s, err := FromManifest(&st.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if err := cat.Add(s); err != nil {
			t.Fatal(err)
		}
		byName[s.Name] = s
	}
	idx := NewIndex()
	inst := newMemInstaller(cat, idx)
	r := &Resolver{Catalog: cat, Installations: idx}
	ex := &Executor{Installer: inst}

	// No SQL Server yet: the interface-only dependency fails the plan.
	req := Request{Namespace: "dev", Name: "reports", RootID: "r1", Stack: Reference{Name: "reporting"}, Parameters: map[string]any{"team": "data"}}
	if _, err := r.Plan(ctx, req); err == nil || !strings.Contains(err.Error(), "no installation in dev or global satisfies the interface (output $id https://cairn.dev/interfaces#sql-server.connection-string)") {
		t.Fatalf("error %v", err)
	}
	// Register the existing server, globally.
	p := planFor(t, r, Request{Namespace: "global", Name: "office-sql", RootID: "r0", Stack: Reference{Name: "shared-sql-server"},
		Parameters: map[string]any{"connectionString": "Server=closet;Database=reports"}})
	if _, err := ex.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	inst.installs["global/office-sql"].Outputs["connection-string"] = "Server=closet;Database=reports" // what the stack's output template gives

	p = planFor(t, r, req)
	if got := nodeSummary(p); len(got) != 3 || !strings.HasPrefix(got[0], "install dev/flags-env-") || got[1] != "reuse global/office-sql shared-sql-server@0.1.0" {
		t.Fatalf("plan %q", got)
	}
	if _, err := ex.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := inst.requests["dev/reports"].Outputs["database"]; got != "Server=closet;Database=reports" {
		t.Fatalf("database output %v", got)
	}
	// A second reporting for the same team reuses the flags; another
	// team's gets its own.
	req2 := req
	req2.Name, req2.RootID = "reports-2", "r2"
	if n := nodeByPath(t, planFor(t, r, req2), "flags"); n.Action != ActionReuse {
		t.Fatalf("same team: %s %s", n.Action, n.Key)
	}
	req2.Parameters = map[string]any{"team": "web"}
	if n := nodeByPath(t, planFor(t, r, req2), "flags"); n.Action != ActionInstall {
		t.Fatalf("other team: %s %s", n.Action, n.Key)
	}
	// The reporting installations provide their interface.
	if st := SharingStatusOf(byName["reporting"]); st.Provides == nil || st.Provides.Interface.ID != "https://cairn.dev/interfaces#reporting" ||
		len(st.Outputs) != 2 {
		t.Fatalf("status.sharing %+v", st)
	}
}

// exampleDir: the dependency examples live in examples/dependencies, the
// others in examples/stacks.
func exampleDir(name string) string {
	switch name {
	case "reporting", "shared-sql-server":
		return "../examples/dependencies/" + name
	}
	return "../examples/stacks/" + name
}
