package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/stack"
)

// stackArchive loads testdata/db of the stack controller with stack.yaml
// edited by edit.
func stackArchive(t *testing.T, edit func(string) string) []byte {
	t.Helper()
	src := filepath.Join("..", "controller", "stack", "testdata", "db")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stack.yaml"), []byte(edit(string(m))), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStackCatalog(t *testing.T) {
	env := newEnv(t)
	h, ctx := env.h, env.ctx
	same := func(s string) string { return s }
	v1 := stackArchive(t, same)
	e, added, err := h.AddStack(ctx, v1)
	if err != nil || !added {
		t.Fatalf("AddStack = %v, %v", added, err)
	}
	typ, err := h.GetType(ctx, e.InstallationType)
	if err != nil {
		t.Fatal(err)
	}
	if typ.Group != "db.test.cairn.dev" || typ.Names == nil || typ.Names.Plural != "dbs" || !strings.Contains(string(typ.JSONSchema), `"engine"`) ||
		!strings.Contains(string(typ.JSONSchema), `"READY"`) {
		t.Errorf("installation Type = %+v %s", typ, typ.JSONSchema)
	}
	if ok, err := h.IsInstallationType(ctx, e.InstallationType); !ok || err != nil {
		t.Errorf("IsInstallationType = %v, %v", ok, err)
	}

	// The same package again changes nothing.
	if _, added, err := h.AddStack(ctx, v1); err != nil || added {
		t.Fatalf("adding the same package again = %v, %v", added, err)
	}
	// Another package under the same name and version is refused.
	changed := stackArchive(t, func(s string) string { return strings.Replace(s, "name: db", "name: db\ndescription: changed", 1) })
	if _, _, err := h.AddStack(ctx, changed); !cairn.HasCode(err, cairn.CodeConflict) || !strings.Contains(err.Error(), "db@0.1.0") {
		t.Fatalf("a different package as db@0.1.0: %v", err)
	}
	// A new version: GetStack without a version returns the highest.
	v2 := stackArchive(t, func(s string) string { return strings.Replace(s, "version: 0.1.0", "version: 0.10.0", 1) })
	if _, added, err := h.AddStack(ctx, v2); err != nil || !added {
		t.Fatalf("AddStack 0.10.0 = %v, %v", added, err)
	}
	got, err := h.GetStack(ctx, "db", "")
	if err != nil || got.Version != "0.10.0" || len(got.Archive) == 0 {
		t.Fatalf("GetStack(db) = %s, %v", got.Version, err)
	}
	list, err := h.ListStacks(ctx)
	if err != nil || len(list) != 2 || list[0].Version != "0.10.0" || list[1].Version != "0.1.0" {
		t.Fatalf("ListStacks = %+v, %v", list, err)
	}
	// A pre-release is listed, but a stack named without a version, and an
	// installation that pins none, keep the highest release; pinned, it is
	// used.
	rc := stackArchive(t, func(s string) string { return strings.Replace(s, "version: 0.1.0", "version: 0.11.0-rc.1", 1) })
	if _, added, err := h.AddStack(ctx, rc); err != nil || !added {
		t.Fatalf("AddStack 0.11.0-rc.1 = %v, %v", added, err)
	}
	if list, err := h.ListStacks(ctx); err != nil || len(list) != 3 || list[0].Version != "0.11.0-rc.1" {
		t.Fatalf("ListStacks = %+v, %v", list, err)
	}
	if got, err := h.GetStack(ctx, "db", ""); err != nil || got.Version != "0.10.0" {
		t.Fatalf("GetStack(db) with a pre-release = %s, %v; want 0.10.0", got.Version, err)
	}
	if got, err := h.StackFor(ctx, e.InstallationType, ""); err != nil || got.Version != "0.10.0" {
		t.Fatalf("StackFor(unpinned) with a pre-release = %s, %v; want 0.10.0", got.Version, err)
	}
	if got, err := h.StackFor(ctx, e.InstallationType, "0.11.0-rc.1"); err != nil || got.Version != "0.11.0-rc.1" {
		t.Fatalf("StackFor(pinned 0.11.0-rc.1) = %s, %v", got.Version, err)
	}
	if _, err := h.GetStack(ctx, "nope", ""); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("GetStack(nope) = %v", err)
	}
	// Not a package at all.
	if _, _, err := h.AddStack(ctx, []byte("not a tarball")); !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Errorf("AddStack(garbage) = %v", err)
	}
}

// sqlEnvArchive loads examples/stacks/sql-env, changed by edit (given the
// package's directory and its stack.yaml, it returns the new stack.yaml).
func sqlEnvArchive(t *testing.T, edit func(dir, manifest string) string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "examples", "stacks", "sql-env"))); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stack.yaml"), []byte(edit(dir, string(m))), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStackKindChangeNeedsNewVersion: a stack version whose kind differs
// from the one an earlier version registered under the same kind.version
// is refused, saying what differs, which version registered it, and what
// to change where: kind.version in stack.yaml, at its line, with a version
// to use. The refusal adds nothing.
func TestStackKindChangeNeedsNewVersion(t *testing.T) {
	env := newEnv(t)
	h, ctx := env.h, env.ctx
	if _, _, err := h.AddStack(ctx, sqlEnvArchive(t, func(_, m string) string { return m })); err != nil {
		t.Fatal(err)
	}
	v2 := func(m string) string { return strings.Replace(m, "version: 0.1.0", "version: 0.2.0", 1) }
	for _, tt := range []struct {
		name string
		edit func(dir, manifest string) string
		want []string
	}{
		{"a configuration set added", func(dir, m string) string {
			if err := os.CopyFS(filepath.Join(dir, "resources", "staging"), os.DirFS(filepath.Join(dir, "resources", "dev"))); err != nil {
				t.Fatal(err)
			}
			return strings.Replace(v2(m), "  - name: prod\n", "  - name: staging\n  - name: prod\n", 1)
		}, []string{`spec.tier: values "dev", "prod" → "dev", "staging", "prod"`}},
		{"a parameter added", func(_, m string) string {
			return strings.Replace(v2(m), "      region:\n", "      zone: {type: string}\n      region:\n", 1)
		}, []string{"spec.zone: added"}},
		{"a printer column removed", func(_, m string) string {
			return strings.Replace(v2(m), "  - {name: Region, type: string, jsonPath: .spec.region}\n", "", 1)
		}, []string{"printer columns"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := h.AddStack(ctx, sqlEnvArchive(t, tt.edit))
			if !cairn.HasCode(err, cairn.CodeConflict) {
				t.Fatalf("AddStack = %v, want a conflict", err)
			}
			for _, w := range append(tt.want, "sql-env@0.2.0", "kind SQLEnv (sql.stacks.cairn.dev/v1alpha1) is already defined by sql-env@0.1.0",
				"change kind.version in stack.yaml (line 11) to a new version, such as v1alpha2") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if list, err := h.ListStacks(ctx); err != nil || len(list) != 1 {
				t.Errorf("the catalog after the refusal: %+v, %v", list, err)
			}
		})
	}
}

// TestStackKindPlural: a kind without a plural is served as controller-gen
// would name it; an explicit plural wins; a kind already registered keeps
// the plural its installations are served as, whatever the rule now says.
func TestStackKindPlural(t *testing.T) {
	env := newEnv(t)
	h, ctx := env.h, env.ctx
	kind := func(k, plural, version string) func(string) string {
		return func(s string) string {
			s = strings.Replace(s, "names: {kind: DB, plural: dbs}", "names: {kind: "+k+plural+"}", 1)
			s = strings.Replace(s, "group: db.test.cairn.dev", "group: "+strings.ToLower(k)+".test.cairn.dev", 1)
			s = strings.Replace(s, "name: db\n", "name: "+strings.ToLower(k)+"\n", 1)
			return strings.Replace(s, "version: 0.1.0", "version: "+version, 1)
		}
	}
	plural := func(e hub.StackEntry) string {
		t.Helper()
		typ, err := h.GetType(ctx, e.InstallationType)
		if err != nil {
			t.Fatal(err)
		}
		return typ.Names.Plural
	}
	for _, tt := range []struct{ kind, plural, want string }{
		{"PortalSettings", "", "portalsettings"},
		{"NetworkPolicy", "", "networkpolicies"},
		{"Box", ", plural: boxen", "boxen"},
	} {
		e, _, err := h.AddStack(ctx, stackArchive(t, kind(tt.kind, tt.plural, "0.1.0")))
		if err != nil {
			t.Fatalf("AddStack(%s) = %v", tt.kind, err)
		}
		if got := plural(e); got != tt.want || e.Manifest.Kind.Names.Plural != tt.want {
			t.Errorf("%s: served as %q, entry says %q; want %q", tt.kind, got, e.Manifest.Kind.Names.Plural, tt.want)
		}
	}

	// Registered under the plural an earlier cairn derived (as an explicit
	// plural does it now), a later version of the stack without a plural
	// keeps it: its installations stay where they are served.
	if _, _, err := h.AddStack(ctx, stackArchive(t, kind("AppSettings", ", plural: appsettingses", "0.1.0"))); err != nil {
		t.Fatal(err)
	}
	e, _, err := h.AddStack(ctx, stackArchive(t, kind("AppSettings", "", "0.2.0")))
	if err != nil {
		t.Fatalf("AddStack of a later version without a plural = %v", err)
	}
	if got := plural(e); got != "appsettingses" || e.Manifest.Kind.Names.Plural != "appsettingses" {
		t.Errorf("AppSettings 0.2.0: served as %q, entry says %q; want the registered appsettingses", got, e.Manifest.Kind.Names.Plural)
	}
	list, err := h.ListStacks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if got := plural(e); e.Manifest.Kind.Names.Plural != got {
			t.Errorf("ListStacks: %s@%s says %q, served as %q", e.Name, e.Version, e.Manifest.Kind.Names.Plural, got)
		}
	}
}
