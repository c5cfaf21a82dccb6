package stack_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

const clusterManifest = `name: %s
version: 0.1.0
kind:
  group: cl.stacks.example.com
  version: v1
  names: {kind: %s}
  scope: Cluster
  parameters:
    type: object
    properties:
      enabled: {type: boolean, default: true}
replacements:
- source: {kind: %s, fieldPath: spec.enabled}
  targets:
  - select: {kind: Flag}
    fieldPaths: [spec.enabled]
`

const clusterFlag = "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: %s%s}\nspec: {enabled: false}\n"

func clusterStack(name, kind string, files map[string]string) map[string]string {
	files["stack.yaml"] = fmt.Sprintf(clusterManifest, name, kind, kind)
	return files
}

// TestClusterInstallationChildren: a cluster-scoped installation's
// children go to the namespaces its package names, and are owned, repaired
// and deleted across them; a namespaced child without one is a render
// error naming it and the fix, and nothing is written.
func TestClusterInstallationChildren(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack(writeStack(t, clusterStack("cl", "Infra", map[string]string{
		"resources/kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
		"resources/a.yaml":             fmt.Sprintf(clusterFlag, "a", ", namespace: infra"),
		"resources/b.yaml":             fmt.Sprintf(clusterFlag, "b", ", namespace: apps"),
	})))
	inst := e.install(entry, "small", map[string]string{"foo-key": "bar-value"}, `{}`)
	if inst.Namespace != "" {
		t.Fatalf("installation namespace %q, want none", inst.Namespace)
	}
	e.reconcile(inst.ID)
	if c := cond(e.status(inst.ID), "Synced"); c.Status != "True" {
		t.Fatalf("Synced = %+v", c)
	}
	where := func() []string {
		var out []string
		for _, k := range e.children(inst) {
			out = append(out, k.Namespace+"/"+k.Name+"="+string(k.Latest.Value))
		}
		slices.Sort(out)
		return out
	}
	want := []string{`apps/small-b={"enabled":true}`, `infra/small-a={"enabled":true}`}
	if got := where(); !slices.Equal(got, want) {
		t.Fatalf("children %v, want %v", got, want)
	}

	// A hand edit in one namespace is set back; a new spec reaches both.
	kids := e.children(inst)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: kids[0].ID, Value: json.RawMessage(`{"enabled":false}`)}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	if got := where(); !slices.Equal(got, want) {
		t.Fatalf("after a hand edit: children %v, want %v", got, want)
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"enabled":false}`)}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	if got := where(); !slices.Equal(got, []string{`apps/small-b={"enabled":false}`, `infra/small-a={"enabled":false}`}) {
		t.Fatalf("after a new spec: children %v", got)
	}

	// Deleted: every child, in every namespace, then the installation.
	if err := e.h.DeleteInstance(e.ctx, inst.ID, ""); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := e.c.Reconcile(e.ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.h.GetInstance(e.ctx, inst.ID, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("the installation is still there: %v", err)
	}
	if got := where(); len(got) != 0 {
		t.Fatalf("children left: %v", got)
	}

	// A namespaced child without a namespace: refused, naming it.
	bad := e.addStack(writeStack(t, clusterStack("bad", "Bad", map[string]string{
		"resources/kustomization.yaml": "resources: [a.yaml, c.yaml]\n",
		"resources/a.yaml":             fmt.Sprintf(clusterFlag, "a", ", namespace: infra"),
		"resources/c.yaml":             fmt.Sprintf(clusterFlag, "c", ""),
	})))
	b := e.install(bad, "small", nil, `{}`)
	if _, err := e.c.Reconcile(e.ctx, b.ID); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := cond(e.status(b.ID), "Synced")
	wantMsg := `Flag c (small-c) has no namespace: Bad is cluster-scoped, so a namespaced child goes to the namespace its stack's resources give it; set metadata.namespace in resources/, or namespace: in a kustomization`
	if c.Status != "False" || !strings.Contains(c.Message, wantMsg) {
		t.Fatalf("Synced = %+v\nwant False containing %q", c, wantMsg)
	}
	if evs := e.status(b.ID).Events; len(evs) == 0 || evs[len(evs)-1].Reason != "RenderError" {
		t.Fatalf("events %+v, want RenderError last", evs)
	}
	if got := e.children(b); len(got) != 0 {
		t.Fatalf("a failed render wrote %d children", len(got))
	}
}
