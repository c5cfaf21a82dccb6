package postgres_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestListOrderPlans: a page of a REST list (one type path in name order,
// or every instance in id order, after the previous page's last) is a
// range scan of an index in the list's order, not a sort of every
// instance, on a table of thousands of instances of several Types.
func TestListOrderPlans(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	// 6,000 instances: 3 type paths, 20 namespaces, ids out of name order.
	seed := `
INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, created_at, latest_rv)
SELECT md5(n::text), 'io.flipt.flag' || (n % 3), '0.1.0', '0.1.0', 'ns' || (n % 20), 'f' || n, now(), 1
FROM generate_series(1, 6000) n;
INSERT INTO resource_versions (instance_id, resource_version, created_at) SELECT id, 1, now() FROM instances;
INSERT INTO instance_labels (instance_id, key, value) SELECT id, 'team', 't' || (length(name) % 4) FROM instances;
ANALYZE instances; ANALYZE resource_versions; ANALYZE instance_labels;`
	if err := postgres.Exec(ctx, s, seed); err != nil {
		t.Fatal(err)
	}
	after := &cairn.Instance{ID: "8", TypeRef: cairn.TypeRef{Path: "io.flipt.flag1"}, Namespace: "ns3", Name: "f300"}
	sel := []labels.Requirement{{Key: "team", Operator: labels.Equals, Values: []string{"t1"}}}
	tests := []struct {
		name string
		f    store.InstanceFilter
		scan string
	}{
		{"kind, all namespaces", store.InstanceFilter{TypePath: "io.flipt.flag1", Order: store.ByName, Limit: 501}, "Index Scan using instances_name_key on instances i"},
		{"kind, all namespaces, continued", store.InstanceFilter{TypePath: "io.flipt.flag1", Order: store.ByName, Limit: 501, After: after}, "Index Scan using instances_name_key on instances i"},
		{"kind, one namespace, continued", store.InstanceFilter{TypePath: "io.flipt.flag1", Namespace: "ns3", Order: store.ByName, Limit: 501, After: after}, "Index Scan using instances_name_key on instances i"},
		{"kind, labels, continued", store.InstanceFilter{TypePath: "io.flipt.flag1", Labels: sel, Order: store.ByName, Limit: 501, After: after}, "Index Scan using instances_name_key on instances i"},
		{"typeinstances", store.InstanceFilter{Order: store.ByID, Limit: 501}, "Index Scan using instances_pkey on instances i"},
		{"typeinstances, continued", store.InstanceFilter{Order: store.ByID, Limit: 501, After: after}, "Index Scan using instances_pkey on instances i"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := postgres.ListPlan(ctx, s, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, tt.scan) || strings.Contains(plan, "Sort Key: i.") || strings.Contains(plan, "Seq Scan on instances i") {
				t.Errorf("plan is no range scan (%s):\n%s", tt.scan, plan)
			}
		})
	}
}
