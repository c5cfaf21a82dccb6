package graphql_test

import (
	"fmt"
	"testing"
)

// listQuery asks for every field Capact's clients read on a list, relations
// and their backends included (resourceVersions apart: see TestListCostIsBounded).
const listQuery = `{ typeInstances(filter: {typeRef: {path: "cap.type.item"}}) {
  id createdAt lockedBy namespace name labels { key value }
  typeRef { path revision }
  backend { id abstract alias url acceptValue contextSchema }
  latestResourceVersion { resourceVersion createdBy metadata { attributes { path revision } } spec { value backend { context } } }
  firstResourceVersion { resourceVersion }
  uses { id typeRef { path revision } backend { id alias } }
  usedBy { id }
} }`

// seed creates n items that use one shared instance, in one batch.
func seed(e *env, n int) {
	e.t.Helper()
	tis := []map[string]any{ti("shared", "cap.type.shared", "0.1.0", 0)}
	var rels [][2]string
	for i := range n {
		alias := fmt.Sprintf("item-%d", i)
		in := ti(alias, "cap.type.item", "0.1.0", map[string]any{"n": i, "name": alias})
		in["attributes"] = []map[string]any{{"path": "cap.attribute.x", "revision": "0.1.0"}}
		tis = append(tis, in)
		rels = append(rels, [2]string{alias, "shared"})
	}
	e.create(tis, rels...)
}

// TestListCostIsBounded counts the store reads of a list: with the
// dataloaders and the store's batched value read, no read happens once per
// instance. Values are read in batches (how many depends on how the
// resolvers' requests fall into the loader's time window, so the test only
// bounds them); everything else costs the same for 10 and for 40 instances.
func TestListCostIsBounded(t *testing.T) {
	costs := map[int]map[string]int{}
	for _, n := range []int{10, 40} {
		e := newEnv(t)
		seed(e, n)
		e.st.reset()
		var out struct{ TypeInstances []instance }
		e.ok(listQuery, nil, &out)
		if len(out.TypeInstances) != n {
			t.Fatalf("listed %d, want %d", len(out.TypeInstances), n)
		}
		for _, x := range out.TypeInstances {
			if len(x.Uses) != 2 || x.LatestResourceVersion == nil || x.LatestResourceVersion.Spec.Value == nil {
				t.Fatalf("incomplete item %+v", x)
			}
		}
		costs[n] = e.st.reset()
		t.Logf("%d instances: %d store reads %v", n, total(costs[n]), costs[n])
	}
	small, large := costs[10], costs[40]
	// Single value reads: at most the built-in backend's own value (its
	// details: alias, acceptValue, ...), once for the whole list; none when
	// the hub decoded that resource version of it before (the seed did).
	if small["Value"] > 1 || large["Value"] > 1 {
		t.Errorf("single value reads: %v for 10, %v for 40; want at most 1 (the backend's)", small, large)
	}
	if large["Values"] < 1 || large["Values"] > 40/4 {
		t.Errorf("%d batched value reads for 40 instances: want the values batched", large["Values"])
	}
	delete(small, "Values")
	delete(large, "Values")
	if total(large) != total(small) {
		t.Errorf("reads other than batched values grow with the list: %v for 10, %v for 40", small, large)
	}
	if total(large) > 12 {
		t.Errorf("%d reads other than batched values for one list: %v", total(large), large)
	}
}

// BenchmarkTypeInstances1000 lists 1,000 instances with every field over
// real HTTP.
func BenchmarkTypeInstances1000(b *testing.B) {
	e := newEnv(b)
	seed(e, 1000)
	b.ReportAllocs()
	for b.Loop() {
		var out struct{ TypeInstances []struct{ ID string } }
		e.ok(listQuery, nil, &out)
		if len(out.TypeInstances) != 1000 {
			b.Fatalf("listed %d", len(out.TypeInstances))
		}
	}
	e.st.reset()
	e.ok(listQuery, nil, nil)
	b.ReportMetric(float64(total(e.st.reset())), "store-reads/op")
}
