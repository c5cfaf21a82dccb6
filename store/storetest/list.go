package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// listFixture creates instances chosen so that each filter below selects a
// distinct subset. Sorted (type path asc, revision desc, createdAt desc,
// id asc) they are 6, 8, 4, 2, 3, 1, 7, 5.
func listFixture(t *testing.T, s store.Store) {
	t.Helper()
	backend := id(100)
	attr := func(path, rev string) cairn.AttributeRef { return cairn.AttributeRef{Path: path, Revision: rev} }
	mk := func(n int, typePath, rev, ns, name, by, backendID string, lbls map[string]string, attrs ...cairn.AttributeRef) cairn.Instance {
		in := instance(n, typePath, rev, ns, name)
		in.Labels = lbls
		in.Latest.CreatedBy = by
		in.Latest.Attributes = attrs
		if backendID != "" {
			in.Backend = cairn.BackendRef{ID: backendID}
		}
		return in
	}
	i8 := mk(8, "cap.type.cache.redis", "1.0.0", "team", "r", "carol", "", nil)
	i8.CreatedAt = at(6) // same createdAt as 6: the id decides
	create(t, s,
		mk(1, "cap.type.db.pg", "0.1.0", "default", "pg1", "alice", backend,
			map[string]string{"env": "prod", "tier": "db"}, attr("cap.attr.managed", "0.1.0")),
		mk(2, "cap.type.db.pg", "0.10.0", "default", "pg2", "bob", "",
			map[string]string{"env": "dev"}, attr("cap.attr.managed", "0.2.0")),
		mk(3, "cap.type.db.pg", "0.9.0", "team", "pg1", "alice", "", nil),
		mk(4, "cap.type.db.pg", "0.10.0", "team", "pg3", "bob", backend,
			map[string]string{"env": "prod", "legacy": "true"}, attr("cap.attr.managed", "0.1.0"), attr("cap.attr.ha", "0.1.0")),
		mk(5, "cap.type.dbx", "0.1.0", "default", "x", "alice", "",
			map[string]string{"tier": "cache"}),
		mk(6, "cap.type.cache.redis", "1.0.0", "default", "r", "carol", "",
			map[string]string{"env": "staging"}, attr("cap.attr.ha", "0.1.0")),
		mk(7, "cap.type.db.pg.replica", "0.1.0", "default", "rep", "alice", "", nil),
		i8,
	)
}

func testListFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	listFixture(t, s)
	req := func(key string, op labels.Operator, values ...string) labels.Requirement {
		return labels.Requirement{Key: key, Operator: op, Values: values}
	}
	ns := func(n ...int) []string {
		out := make([]string, len(n))
		for i, x := range n {
			out[i] = id(x)
		}
		return out
	}
	tests := []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"all in order", store.InstanceFilter{}, ns(6, 8, 4, 2, 3, 1, 7, 5)},
		{"type path exact", store.InstanceFilter{TypePath: "cap.type.db.pg"}, ns(4, 2, 3, 1)},
		{"type path exact is not a prefix", store.InstanceFilter{TypePath: "cap.type.db"}, nil},
		{"type path pattern", store.InstanceFilter{TypePath: "cap.type.db.*"}, ns(4, 2, 3, 1, 7)},
		{"type path pattern nested", store.InstanceFilter{TypePath: "cap.type.*"}, ns(6, 8, 4, 2, 3, 1, 7, 5)},
		{"type path pattern of a leaf", store.InstanceFilter{TypePath: "cap.type.db.pg.*"}, ns(7)},
		{"type revision", store.InstanceFilter{TypeRevision: "0.10.0"}, ns(4, 2)},
		{"type path and revision", store.InstanceFilter{TypePath: "cap.type.db.pg", TypeRevision: "0.1.0"}, ns(1)},
		{"namespace", store.InstanceFilter{Namespace: "team"}, ns(8, 4, 3)},
		{"name", store.InstanceFilter{Name: "pg1"}, ns(3, 1)},
		{"namespace and name", store.InstanceFilter{Namespace: "team", Name: "pg1"}, ns(3)},
		{"id", store.InstanceFilter{ID: id(4)}, ns(4)},
		{"id by id order", store.InstanceFilter{ID: id(4), Order: store.ByID}, ns(4)},
		{"id and a namespace it is not in", store.InstanceFilter{ID: id(4), Namespace: "default"}, nil},
		{"unknown id", store.InstanceFilter{ID: id(99)}, nil},
		{"created by", store.InstanceFilter{CreatedBy: "alice"}, ns(3, 1, 7, 5)},
		{"backend", store.InstanceFilter{BackendID: id(100)}, ns(4, 1)},
		{"backend builtin", store.InstanceFilter{BackendID: cairn.BuiltinBackendID}, ns(6, 8, 2, 3, 7, 5)},
		{"label =", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.Equals, "prod")}}, ns(4, 1)},
		{"label !=", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.NotEquals, "prod")}}, ns(6, 8, 2, 3, 7, 5)},
		{"label in", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.In, "prod", "dev")}}, ns(4, 2, 1)},
		{"label notin", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.NotIn, "prod", "dev")}}, ns(6, 8, 3, 7, 5)},
		{"label exists", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.Exists)}}, ns(6, 4, 2, 1)},
		{"label does not exist", store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.DoesNotExist)}}, ns(8, 3, 7, 5)},
		{"labels all must match", store.InstanceFilter{Labels: []labels.Requirement{
			req("env", labels.Equals, "prod"), req("legacy", labels.Exists),
		}}, ns(4)},
		{"labels mixed operators", store.InstanceFilter{Labels: []labels.Requirement{
			req("tier", labels.In, "db", "cache"), req("env", labels.NotEquals, "prod"),
		}}, ns(5)},
		{"label on unknown key", store.InstanceFilter{Labels: []labels.Requirement{req("nope", labels.Equals, "x")}}, nil},
		{"attribute", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed"}}}, ns(4, 2, 1)},
		{"attribute at revision", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed", Revision: "0.1.0"}}}, ns(4, 1)},
		{"attribute excluded", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed", Exclude: true}}}, ns(6, 8, 3, 7, 5)},
		{"attribute at revision excluded", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed", Revision: "0.1.0", Exclude: true}}}, ns(6, 8, 2, 3, 7, 5)},
		{"attributes both included", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed"}, {Path: "cap.attr.ha"}}}, ns(4)},
		{"attribute included and excluded", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.managed"}, {Path: "cap.attr.ha", Exclude: true}}}, ns(2, 1)},
		{"attribute at unknown revision", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.ha", Revision: "9.0.0"}}}, nil},
		{"combined", store.InstanceFilter{
			TypePath:   "cap.type.db.*",
			Namespace:  "default",
			CreatedBy:  "bob",
			Labels:     []labels.Requirement{req("env", labels.Exists)},
			Attributes: []store.AttributeFilter{{Path: "cap.attr.managed", Revision: "0.2.0"}},
		}, ns(2)},
		{"combined no match", store.InstanceFilter{Namespace: "team", BackendID: id(100), CreatedBy: "alice"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListInstances(ctx, tt.f)
			if err != nil {
				t.Fatalf("ListInstances: %v", err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("ListInstances(%+v) =\n\t%q\nwant\n\t%q", tt.f, ids(got), tt.want)
			}
			// Listed instances are complete: labels, latest version.
			for _, in := range got {
				wantInstance(t, in, get(t, s, in.ID))
			}
		})
	}

	// Reads through a transaction filter the same way.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.ListInstances(ctx, store.InstanceFilter{Labels: []labels.Requirement{req("env", labels.In, "prod", "dev")}})
		if err != nil {
			return err
		}
		if !slices.Equal(ids(got), ns(4, 2, 1)) {
			t.Errorf("tx.ListInstances = %q, want %q", ids(got), ns(4, 2, 1))
		}
		return nil
	})
}

// testListRelations checks that listed instances carry labels, uses, usedBy
// and their latest version, as single reads do.
func testListRelations(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := fullInstance(1)
	b := instance(2, "cap.type.b", "0.1.0", "default", "b")
	b.Labels = map[string]string{"k": "v"}
	c := instance(3, "cap.type.c", "0.1.0", "default", "c")
	create(t, s, a, b, c)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddUses(ctx, a.ID, b.ID); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, a.ID, c.ID); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, c.ID, b.ID); err != nil {
			return err
		}
		return tx.AddResourceVersion(ctx, c.ID, cairn.ResourceVersion{ResourceVersion: 2, CreatedBy: "bob", CreatedAt: at(50)})
	})
	list, err := s.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	a.Uses, a.UsedBy = []string{b.ID, c.ID}, nil
	b.Uses, b.UsedBy = nil, []string{c.ID, a.ID} // cap.type.c < cap.type.database...
	c.Uses, c.UsedBy = []string{b.ID}, []string{a.ID}
	c.Latest = cairn.ResourceVersion{ResourceVersion: 2, CreatedBy: "bob", CreatedAt: at(50)}
	want := []cairn.Instance{b, c, a} // cap.type.b < cap.type.c < cap.type.database...
	if len(list) != len(want) {
		t.Fatalf("ListInstances = %q, want %q", ids(list), ids(want))
	}
	for i := range want {
		wantInstance(t, list[i], want[i])
	}
}
