package deps

import (
	"context"
	"strings"
	"testing"
)

// clusterStacks: platform is cluster-scoped (its installations have no
// namespace); app, a namespaced stack, maps a parameter into it (so it
// reuses only the installation of the same definition); solo needs an
// exclusive one; croot is a cluster-scoped root with a namespaced
// dependency whose group is ${installation.namespace}.
func clusterStacks(t *testing.T) []*Stack {
	t.Helper()
	platform := stackYAML(t, `{name: platform, version: 1.0.0, parameters: {properties: {region: {type: string}}, required: [region]}, outputs: [{name: settings}]}`)
	platform.Cluster = true
	croot := stackYAML(t, `name: croot
version: 1.0.0
dependencies:
  requires:
  - name: flags
    bundle: {reference: flags@1.0.0}
    sharing: {mode: group, group: {name: "${installation.namespace}"}}
`)
	croot.Cluster = true
	return []*Stack{platform, croot,
		stackYAML(t, `{name: flags, version: 1.0.0, outputs: [{name: url}]}`),
		stackYAML(t, `name: app
version: 1.0.0
dependencies:
  requires:
  - {name: platform, bundle: {reference: platform@1.0.0}, parameters: {region: eu}}
`),
		stackYAML(t, `name: solo
version: 1.0.0
dependencies:
  requires:
  - {name: platform, bundle: {reference: platform@1.0.0}, parameters: {region: eu}, sharing: {mode: none}}
`),
	}
}

// A cluster-scoped node has no namespace: its key, the plan's text, the
// edges and the install request name it alone, and a later plan from any
// namespace finds it under that key (seed 004: cluster-scoped kinds).
func TestClusterScopedNodesHaveNoNamespace(t *testing.T) {
	ctx := context.Background()
	cat := catalog(t, clusterStacks(t)...)
	idx := NewIndex()
	r := &Resolver{Catalog: cat, Installations: idx}
	plan := func(ns, name, stack string) *Plan {
		t.Helper()
		p, err := r.Plan(ctx, Request{Namespace: ns, Name: name, RootID: "r-" + ns + "-" + name, Stack: Reference{Name: stack}})
		if err != nil {
			t.Fatalf("plan %s/%s: %v", ns, name, err)
		}
		return p
	}

	p := plan("team-a", "a1", "app")
	n := nodeByPath(t, p, "platform")
	if n.Namespace != "" || strings.Contains(n.Key, "/") || n.Key != n.Name {
		t.Fatalf("platform node key %q namespace %q, want its name alone and no namespace", n.Key, n.Namespace)
	}
	var text strings.Builder
	if err := p.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "/"+n.Name) {
		t.Fatalf("the plan prints the cluster-scoped node with a namespace:\n%s", text.String())
	}
	if !strings.Contains(text.String(), "  install "+n.Key+"  platform@1.0.0") {
		t.Fatalf("the plan does not print the node as %s:\n%s", n.Key, text.String())
	}
	if len(p.Edges) != 1 || p.Edges[0].From != n.Key || p.Edges[0].To != "team-a/a1" {
		t.Fatalf("edges %+v, want %s -> team-a/a1", p.Edges, n.Key)
	}
	inst := newMemInstaller(cat, idx)
	if _, err := (&Executor{Installer: inst}).Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	if req, ok := inst.requests[n.Key]; !ok || req.Namespace != "" || !slicesEqual(inst.requests["team-a/a1"].Uses, []string{n.Key}) {
		t.Fatalf("requests %v: want %s with no namespace, used by team-a/a1", inst.keys(), n.Key)
	}

	// The second plan, of the same root and of another namespace's, finds
	// the first one's node under the same key.
	for _, ns := range []string{"team-a", "team-b"} {
		again := nodeByPath(t, plan(ns, "a1", "app"), "platform")
		if again.Action != ActionReuse || again.Key != n.Key || again.Namespace != "" {
			t.Fatalf("%s: platform node %s %s (namespace %q), want the reuse of %s", ns, again.Action, again.Key, again.Namespace, n.Key)
		}
	}

	// An exclusive cluster-scoped dependency of two roots of one name in two
	// namespaces: one each, not one name for both.
	a, b := nodeByPath(t, plan("team-a", "s", "solo"), "platform"), nodeByPath(t, plan("team-b", "s", "solo"), "platform")
	if a.Key == b.Key || a.Namespace != "" || b.Namespace != "" {
		t.Fatalf("exclusive cluster-scoped dependencies of team-a/s and team-b/s: %s and %s, want two names without a namespace", a.Key, b.Key)
	}

	// --dependency names the cluster-scoped installation with or without
	// the global namespace.
	for _, o := range []string{"platform=Platform/" + n.Name, "platform=global/Platform/" + n.Name} {
		ov, err := ParseOverride(o)
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.Plan(ctx, Request{Namespace: "team-c", Name: "c", RootID: "rc", Stack: Reference{Name: "solo"}, Overrides: []Override{ov}})
		if err != nil {
			t.Fatalf("--dependency %s: %v", o, err)
		}
		if got := nodeByPath(t, p, "platform"); got.Key != n.Key || got.Action != ActionReuse {
			t.Fatalf("--dependency %s: %s %s, want the reuse of %s", o, got.Action, got.Key, n.Key)
		}
	}

	// A cluster-scoped root: no namespace (the request's is ignored), and
	// its namespaced dependencies resolve as from the global namespace.
	cp := plan("dev", "c1", "croot")
	if cp.Root != "c1" || cp.Nodes[len(cp.Nodes)-1].Namespace != "" {
		t.Fatalf("cluster-scoped root %q, want c1 with no namespace", cp.Root)
	}
	f := nodeByPath(t, cp, "flags")
	if f.Namespace != DefaultGlobalNamespace || f.Sharing.Group != DefaultGlobalNamespace || !strings.HasPrefix(f.Key, "global/") {
		t.Fatalf("flags of a cluster-scoped root: %s group %q, want global/... in group global", f.Key, f.Sharing.Group)
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// Each node's schema defaults are applied before its own dependencies'
// mappings read its parameters: needs -> mid (team defaults to data, zone
// of cfg to z) -> leaf (team and zone required, mapped from mid's).
func TestNodeDefaultsReachItsDependencies(t *testing.T) {
	ctx := context.Background()
	leaf := stackYAML(t, `{name: leaf, version: 1.0.0, parameters: {properties: {team: {type: string}, zone: {type: string}}, required: [team, zone]}}`)
	mid := stackYAML(t, `name: mid
version: 1.0.0
parameters:
  properties:
    team: {type: string, default: data}
    cfg: {type: object, properties: {zone: {type: string, default: z}, size: {type: integer}}}
dependencies:
  requires:
  - name: leaf
    bundle: {reference: leaf@1.0.0}
    parameters: {team: "${bundle.parameters.team}", zone: "${bundle.parameters.cfg.zone}"}
`)
	needs := stackYAML(t, `name: needs
version: 1.0.0
dependencies:
  requires:
  - {name: mid, bundle: {reference: mid@1.0.0}, parameters: {cfg: {size: 2}}}
`)
	cat := catalog(t, leaf, mid, needs)
	idx := NewIndex()
	p, err := (&Resolver{Catalog: cat, Installations: idx}).Plan(ctx, Request{Namespace: "dev", Name: "n", RootID: "r1", Stack: Reference{Name: "needs"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("the plan: %v", err)
	}
	l := nodeByPath(t, p, "mid.leaf")
	if l.Parameters["team"].Value != "data" || l.Parameters["zone"].Value != "z" {
		t.Fatalf("leaf parameters %+v, want team data and zone z from mid's defaults", l.Parameters)
	}
	inst := newMemInstaller(cat, idx)
	if _, err := (&Executor{Installer: inst}).Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := inst.requests[l.Key].Parameters; got["team"] != "data" || got["zone"] != "z" {
		t.Fatalf("leaf installed with %v, want team data and zone z", got)
	}
}
