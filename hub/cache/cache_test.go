package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/hub/cache"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// fixture is a hub on a real SQLite file with instances of three Type
// revisions across two namespaces, labelled, some using others.
func fixture(t testing.TB, n int) (store.Store, *hub.Hub) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, NoReadCache: true})
	if err != nil {
		t.Fatal(err)
	}
	refs := []cairn.TypeRef{{Path: "cap.type.a", Revision: "0.1.0"}, {Path: "cap.type.a", Revision: "0.10.0"}, {Path: "cap.type.b.c", Revision: "1.0.0"}}
	var ins []hub.NewInstance
	var rels []hub.UsesRelation
	for i := range n {
		ins = append(ins, hub.NewInstance{
			Alias:     fmt.Sprintf("i%d", i),
			TypeRef:   refs[i%len(refs)],
			Namespace: []string{"default", "other"}[i%2],
			Name:      fmt.Sprintf("n%03d", i),
			Labels:    map[string]string{"team": fmt.Sprintf("t%d", i%4), "tier": []string{"web", "db", "cache"}[i%3]},
			Value:     json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
		})
		if i > 0 && i%5 == 0 {
			rels = append(rels, hub.UsesRelation{From: fmt.Sprintf("i%d", i), To: fmt.Sprintf("i%d", i-1)})
		}
	}
	if n == 0 {
		return st, h
	}
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: ins, UsesRelations: rels}); err != nil {
		t.Fatal(err)
	}
	return st, h
}

// synced is fixture with a cache synced to it and the instances listed
// from the store.
func synced(t *testing.T, n int) (store.Store, *hub.Hub, *cache.Cache, []cairn.Instance) {
	t.Helper()
	st, h := fixture(t, n)
	c := cache.New(st)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListInstances(context.Background(), store.InstanceFilter{TypePath: "cap.type.*"})
	if err != nil {
		t.Fatal(err)
	}
	return st, h, c, all
}

func sel(t *testing.T, s string) []labels.Requirement {
	t.Helper()
	l, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestListMatchesStore: for every filter the cache serves, in every
// order, it answers exactly what the store answers, order, relations and
// values included, page by page with limit and after.
func TestListMatchesStore(t *testing.T) {
	ctx := context.Background()
	st, _ := fixture(t, 60)
	c := cache.New(st)
	some, err := st.ListInstances(ctx, store.InstanceFilter{Name: "n007"})
	if err != nil || len(some) == 0 {
		t.Fatalf("list n007: %v %v", some, err)
	}
	tests := []struct {
		name string
		f    store.InstanceFilter
	}{
		{"all", store.InstanceFilter{}},
		{"id", store.InstanceFilter{ID: some[0].ID}},
		{"id and another name", store.InstanceFilter{ID: some[0].ID, Name: "n008"}},
		{"unknown id", store.InstanceFilter{ID: "no-such-id"}},
		{"type", store.InstanceFilter{TypePath: "cap.type.a"}},
		{"type prefix", store.InstanceFilter{TypePath: "cap.type.*"}},
		{"type prefix b", store.InstanceFilter{TypePath: "cap.type.b.*"}},
		{"revision", store.InstanceFilter{TypePath: "cap.type.a", TypeRevision: "0.10.0"}},
		{"namespace", store.InstanceFilter{Namespace: "other"}},
		{"name", store.InstanceFilter{Name: "n007"}},
		{"labels", store.InstanceFilter{Labels: sel(t, "team in (t1,t2),tier!=db")}},
		{"label exists", store.InstanceFilter{Labels: sel(t, "!team")}},
		{"backend", store.InstanceFilter{BackendID: cairn.BuiltinBackendID}},
		{"created by", store.InstanceFilter{CreatedBy: "nobody"}},
	}
	var ordered []struct {
		name string
		f    store.InstanceFilter
	}
	for _, o := range []store.InstanceOrder{store.ByType, store.ByName, store.ByID} {
		for _, tt := range tests {
			tt.f.Order = o
			ordered = append(ordered, struct {
				name string
				f    store.InstanceFilter
			}{fmt.Sprintf("order %d/%s", o, tt.name), tt.f})
		}
	}
	for _, tt := range ordered {
		t.Run(tt.name, func(t *testing.T) {
			want, err := st.ListInstances(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.List(ctx, tt.f, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(got), ids(want)) {
				t.Fatalf("cache lists\n%v\nstore lists\n%v", ids(got), ids(want))
			}
			for i := range want {
				w, g := want[i], got[i]
				if !reflect.DeepEqual(g.Uses, w.Uses) || !reflect.DeepEqual(g.UsedBy, w.UsedBy) || g.Seq != w.Seq || g.Latest.ResourceVersion != w.Latest.ResourceVersion {
					t.Fatalf("%s: cache has uses %v usedBy %v seq %d, store %v %v %d", w.ID, g.Uses, g.UsedBy, g.Seq, w.Uses, w.UsedBy, w.Seq)
				}
			}
			// Pages of 7 with after give the same sequence.
			var paged []cairn.Instance
			f := tt.f
			f.Limit = 7
			for {
				page, err := c.List(ctx, f, false)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page...)
				if len(page) < f.Limit {
					break
				}
				f.After = &page[len(page)-1]
			}
			if !reflect.DeepEqual(ids(paged), ids(want)) {
				t.Fatalf("paged cache lists\n%v\nstore lists\n%v", ids(paged), ids(want))
			}
		})
	}
}

// TestFollowsChanges: after writes through the hub the cache re-reads
// what changed, including relations a deletion removes from another
// instance and values of new resource versions.
func TestFollowsChanges(t *testing.T) {
	ctx := context.Background()
	st, h, c, all := synced(t, 12)
	// Delete a user (i10 uses i9), update another, create one more.
	var user, other cairn.Instance
	for _, in := range all {
		switch in.Name {
		case "n010":
			user = in
		case "n003":
			other = in
		}
	}
	if err := h.DeleteInstance(ctx, user.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: other.ID, Value: json.RawMessage(`{"i":"new"}`)}}); err != nil {
		t.Fatal(err)
	}
	want, err := st.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.List(ctx, store.InstanceFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids(got), ids(want)) {
		t.Fatalf("cache lists %v, store %v", ids(got), ids(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].UsedBy, want[i].UsedBy) {
			t.Fatalf("%s: cache usedBy %v, store %v", want[i].ID, got[i].UsedBy, want[i].UsedBy)
		}
	}
	o, ok, err := c.Get(ctx, other.ID, true)
	if err != nil || !ok || string(o.Latest.Value) != `{"i":"new"}` || o.Latest.ResourceVersion != 2 {
		t.Fatalf("cache has %s version %d (ok %v, err %v), want the update", o.Latest.Value, o.Latest.ResourceVersion, ok, err)
	}
	if _, ok, _ := c.Get(ctx, user.ID, false); ok {
		t.Fatal("cache still has the deleted instance")
	}
	if c.Applied() < o.Seq {
		t.Fatalf("cache applied %d, behind the update's seq %d", c.Applied(), o.Seq)
	}
}

func ids(list []cairn.Instance) []string {
	out := make([]string, len(list))
	for i, in := range list {
		out[i] = in.Namespace + "/" + in.Name
	}
	return out
}

// BenchmarkGet compares a consistent read of one instance from the cache
// with the same read from the store (the baseline, in the same run).
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	st, _ := fixture(b, 100)
	c := cache.New(st)
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			in, err := st.GetInstanceByName(ctx, "cap.type.a", "default", "n042")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Value(ctx, in.ID, in.Latest.ResourceVersion); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := c.GetByName(ctx, "cap.type.a", "default", "n042", true); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkList100 compares listing 100 instances with values.
func BenchmarkList100(b *testing.B) {
	ctx := context.Background()
	st, h := fixture(b, 300)
	c := cache.New(st)
	f := store.InstanceFilter{TypePath: "cap.type.a", TypeRevision: "0.1.0"}
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			list, err := st.ListInstances(ctx, f)
			if err != nil {
				b.Fatal(err)
			}
			refs := make([]hub.ValueRef, len(list))
			for i := range list {
				refs[i] = hub.ValueRef{Instance: list[i], Version: list[i].Latest}
			}
			if _, err := h.Values(ctx, refs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.List(ctx, f, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEdgeToChangedInstance: an edge added to an instance in a transaction
// that logs a change of that instance only (a stack's installation using
// a child it creates) is in the user's Uses, in the store's order.
func TestEdgeToChangedInstance(t *testing.T) {
	ctx := context.Background()
	st, _, c, all := synced(t, 6)
	owner := all[0]
	// Two children, each created with only the owner's edge to it.
	for _, child := range []string{"child-b", "child-a"} {
		err := st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			in := cairn.Instance{ID: child, TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, Namespace: "default", Name: child,
				Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, CreatedAt: owner.CreatedAt,
				Latest: cairn.ResourceVersion{ResourceVersion: 1, CreatedAt: owner.CreatedAt}}
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
			if err := tx.PutValue(ctx, child, 1, json.RawMessage(`{}`)); err != nil {
				return err
			}
			return tx.AddUses(ctx, owner.ID, child)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want, err := st.GetInstances(ctx, []string{owner.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get(ctx, owner.ID, false)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !reflect.DeepEqual(got.Uses, want[0].Uses) {
		t.Fatalf("cache has the owner using %v, store %v", got.Uses, want[0].Uses)
	}
}

// ChangesAfter answers what the store's change log answers for every
// position the cache passed, in pages, and leaves older positions (and
// ones it has not reached) to the store.
func TestChangesAfterMatchesStore(t *testing.T) {
	ctx := context.Background()
	st, h := fixture(t, 6)
	c := cache.New(st)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	start := c.Applied()
	if _, ok, err := c.ChangesAfter(ctx, start-1, 10); err != nil || ok {
		t.Fatalf("a position before the cache loaded: ok %v, %v; want the store asked", ok, err)
	}
	list, err := st.ListInstances(ctx, store.InstanceFilter{TypePath: "cap.type.*"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 { // updates through the hub, as another replica's would be
		in := list[i%len(list)]
		if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: in.ID, Value: json.RawMessage(fmt.Sprintf(`{"u":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := st.Changes(ctx, start, 100)
	if err != nil || len(want) != 7 {
		t.Fatalf("store changes %d, %v", len(want), err)
	}
	for after := start; after <= want[len(want)-1].Seq; after++ {
		for _, limit := range []int{1, 3, 100} {
			got, ok, err := c.ChangesAfter(ctx, after, limit)
			if err != nil || !ok {
				t.Fatalf("after %d: ok %v, %v", after, ok, err)
			}
			exp, err := st.Changes(ctx, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(exp) == 0 {
				exp = nil
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("after %d limit %d: cache %+v, store %+v", after, limit, got, exp)
			}
		}
	}
	if _, ok, _ := c.ChangesAfter(ctx, want[len(want)-1].Seq+5, 10); ok {
		t.Fatal("a position past the store's is answered from the cache")
	}
	// Pruned through the third change: from before it, the store answers
	// (Gone); from it on, the cache still does.
	c.Forget(want[2].Seq)
	if _, ok, _ := c.ChangesAfter(ctx, want[2].Seq-1, 10); ok {
		t.Fatal("a forgotten position is answered from the cache")
	}
	if got, ok, err := c.ChangesAfter(ctx, want[2].Seq, 10); err != nil || !ok || !reflect.DeepEqual(got, want[3:]) {
		t.Fatalf("after the forgotten part: %+v, ok %v, %v; want %+v", got, ok, err, want[3:])
	}
}

// TestEdgeBetweenUnchangedInstances: an edge added, then removed, between
// two instances a transaction does not otherwise change (a create whose
// usesRelations link two existing instances) reaches the cache through
// the change log: the store logs it as a change of the edge's source.
func TestEdgeBetweenUnchangedInstances(t *testing.T) {
	ctx := context.Background()
	st, _, c, all := synced(t, 6)
	from, to := all[0].ID, all[1].ID
	check := func(step string) {
		t.Helper()
		want, err := st.GetInstances(ctx, []string{from, to})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			got, ok, err := c.Get(ctx, w.ID, false)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			if !reflect.DeepEqual(got.Uses, w.Uses) || !reflect.DeepEqual(got.UsedBy, w.UsedBy) || got.Seq != w.Seq {
				t.Fatalf("%s: cache has %s using %v, used by %v, seq %d; store %v, %v, %d", step, w.ID, got.Uses, got.UsedBy, got.Seq, w.Uses, w.UsedBy, w.Seq)
			}
		}
	}
	before, err := st.GetInstances(ctx, []string{from})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		fn   func(ctx context.Context, tx store.Tx) error
	}{
		{"add", func(ctx context.Context, tx store.Tx) error { return tx.AddUses(ctx, from, to) }},
		{"add again", func(ctx context.Context, tx store.Tx) error { return tx.AddUses(ctx, from, to) }},
		{"remove", func(ctx context.Context, tx store.Tx) error { return tx.RemoveUses(ctx, from, to) }},
	} {
		if err := st.Update(ctx, step.fn); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		check(step.name)
	}
	after, err := st.GetInstances(ctx, []string{from})
	if err != nil {
		t.Fatal(err)
	}
	// Two changes of from (add, remove); adding an edge already there is none.
	if after[0].Seq == before[0].Seq {
		t.Fatalf("seq of %s did not move (%d): the edge changes were not logged", from, after[0].Seq)
	}
}

// TestListOrdersPagedAcrossWrites: paging a type path in name or id order
// while instances are created and deleted between pages (through another
// hub on the store, so the cache learns of them from the change log), an
// instance there throughout is listed once, in order; the instance a page
// ended with may be gone, and one created after it is listed.
func TestListOrdersPagedAcrossWrites(t *testing.T) {
	ctx := context.Background()
	st, h := fixture(t, 0)
	c := cache.New(st)
	var ins []hub.NewInstance
	for i := range 24 {
		// Created in name order: the store's own order is the reverse.
		ins = append(ins, hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.p", Revision: []string{"0.1.0", "0.10.0"}[i%2]},
			Namespace: []string{"a", "a-b", "b"}[i/8], Name: fmt.Sprintf("n%02d", i%8), Value: json.RawMessage(`{}`)})
	}
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: ins}); err != nil {
		t.Fatal(err)
	}
	key := func(o store.InstanceOrder, in cairn.Instance) string {
		if o == store.ByID {
			return in.ID
		}
		return in.Namespace + "\x00" + in.Name
	}
	for _, o := range []store.InstanceOrder{store.ByName, store.ByID} {
		f := store.InstanceFilter{TypePath: "cap.type.p", Order: o, Limit: 5}
		before, err := c.List(ctx, f, false)
		if err != nil {
			t.Fatal(err)
		}
		throughout := map[string]bool{}
		all, err := c.List(ctx, store.InstanceFilter{TypePath: "cap.type.p", Order: o}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range all {
			throughout[in.ID] = true
		}
		var got []cairn.Instance
		late := map[string]bool{}
		for page := 0; len(before) > 0; page++ {
			got = append(got, before...)
			if len(before) < f.Limit {
				break
			}
			last := before[len(before)-1]
			// Delete the page's last instance and the one after it, and
			// create one sorting right after the page.
			for _, in := range all {
				if throughout[in.ID] && key(o, in) > key(o, last) {
					if err := h.DeleteInstance(ctx, in.ID, ""); err != nil {
						t.Fatal(err)
					}
					delete(throughout, in.ID)
					break
				}
			}
			if err := h.DeleteInstance(ctx, last.ID, ""); err != nil {
				t.Fatal(err)
			}
			delete(throughout, last.ID)
			made, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cairn.TypeRef{Path: "cap.type.p", Revision: "0.1.0"},
				Namespace: last.Namespace, Name: last.Name + fmt.Sprintf("-%d-%d", o, page), Value: json.RawMessage(`{}`)}}})
			if err != nil {
				t.Fatal(err)
			}
			if o == store.ByName || made[0].Instance.ID > last.ID {
				late[made[0].Instance.ID] = true
			}
			f.After = &last
			if before, err = c.List(ctx, f, false); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]int{}
		for i, in := range got {
			seen[in.ID]++
			if i > 0 && key(o, got[i-1]) >= key(o, in) {
				t.Errorf("order %d: %s/%s listed after %s/%s", o, in.Namespace, in.Name, got[i-1].Namespace, got[i-1].Name)
			}
		}
		for id := range throughout {
			if seen[id] != 1 {
				t.Errorf("order %d: %s, there throughout, listed %d times", o, id, seen[id])
			}
		}
		for id := range late {
			if seen[id] != 1 {
				t.Errorf("order %d: %s, created after the end of its page, listed %d times", o, id, seen[id])
			}
		}
	}
}
