package deps

import (
	"context"
	"slices"
	"testing"
)

// TestResolveDiamondOverlappingRanges: two dependencies of one graph on
// the same shared stack, with different ranges that one version meets, get
// one installation, as they do when installed one after the other (the
// second reuses the first's). Ranges nothing meets together get one each.
func TestResolveDiamondOverlappingRanges(t *testing.T) {
	svc := func(name, rng string) *Stack {
		return stackYAML(t, `name: `+name+`
version: 1.0.0
dependencies:
  requires:
  - {name: cache, bundle: {reference: cache, version: "`+rng+`"}}
`)
	}
	stacks := []*Stack{
		stackYAML(t, `{name: cache, version: 0.1.0, outputs: [{name: host}]}`),
		stackYAML(t, `{name: cache, version: 0.2.0, outputs: [{name: host}]}`),
		stackYAML(t, `{name: cache, version: 1.0.0, outputs: [{name: host}]}`),
		svc("svc-x", "^0.x"), svc("svc-z", "0.2.x"), svc("svc-y", "1.x"),
		stackYAML(t, `name: both
version: 1.0.0
dependencies:
  requires:
  - {name: x, bundle: svc-x}
  - {name: z, bundle: svc-z}
  - {name: w, bundle: svc-y}
`),
	}
	cat := catalog(t, stacks...)
	idx := NewIndex()
	r := &Resolver{Catalog: cat, Installations: idx}
	ctx := context.Background()
	p, err := r.Plan(ctx, Request{Namespace: "dev", Name: "b", RootID: "r", Stack: Reference{Name: "both"}})
	if err != nil {
		t.Fatal(err)
	}
	x, z, y := nodeByPath(t, p, "x.cache"), nodeByPath(t, p, "z.cache"), nodeByPath(t, p, "w.cache")
	if x != z || x.Stack.Version != "0.2.0" || !slices.Equal(x.Paths, []string{"x.cache", "z.cache"}) {
		t.Fatalf("x.cache %s %s %v, z.cache %s: want one installation of 0.2.0 for both", x.Key, x.Stack, x.Paths, z.Key)
	}
	if y == x || y.Stack.Version != "1.0.0" {
		t.Fatalf("w.cache %s %s: want its own installation of 1.0.0", y.Key, y.Stack)
	}
	// Executed, the svc-x and svc-z installations both use the one cache.
	inst := newMemInstaller(cat, idx)
	if _, err := (&Executor{Installer: inst}).Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{nodeByPath(t, p, "x").Key, nodeByPath(t, p, "z").Key} {
		if uses := inst.requests[svc].Uses; !slices.Equal(uses, []string{x.Key}) {
			t.Fatalf("%s uses %v, want [%s]", svc, uses, x.Key)
		}
	}
}
