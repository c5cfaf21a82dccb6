package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// TestListOrderPlans: a page of a REST list (one type path in name order,
// or every instance in id order, after the previous page's last) is a
// range scan of an index in the list's order: no sort of every instance.
func TestListOrderPlans(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := &cairn.Instance{ID: "x", TypeRef: cairn.TypeRef{Path: "io.flipt.flag"}, Namespace: "default", Name: "n"}
	sel := []labels.Requirement{{Key: "team", Operator: labels.Equals, Values: []string{"a"}}}
	tests := []struct {
		name  string
		f     store.InstanceFilter
		index string
	}{
		{"kind, all namespaces", store.InstanceFilter{TypePath: "io.flipt.flag", Order: store.ByName, Limit: 501}, "sqlite_autoindex_instances_2 (type_path=?)"},
		{"kind, all namespaces, continued", store.InstanceFilter{TypePath: "io.flipt.flag", Order: store.ByName, Limit: 501, After: after}, "sqlite_autoindex_instances_2 (type_path=? AND (namespace,name)>(?,?))"},
		{"kind, one namespace, continued", store.InstanceFilter{TypePath: "io.flipt.flag", Namespace: "default", Order: store.ByName, Limit: 501, After: after}, "sqlite_autoindex_instances_2 (type_path=? AND namespace=? AND name>?)"},
		{"kind, labels, continued", store.InstanceFilter{TypePath: "io.flipt.flag", Labels: sel, Order: store.ByName, Limit: 501, After: after}, "sqlite_autoindex_instances_2 (type_path=? AND (namespace,name)>(?,?))"},
		{"typeinstances", store.InstanceFilter{Order: store.ByID, Limit: 501}, "sqlite_autoindex_instances_1"},
		{"typeinstances, continued", store.InstanceFilter{Order: store.ByID, Limit: 501, After: after}, "sqlite_autoindex_instances_1 (id>?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, args, err := listQuery(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			ok := false
			for _, d := range plan {
				if strings.Contains(d, "TEMP B-TREE") {
					ok = false
					break
				}
				ok = ok || strings.HasPrefix(d, "SCAN i USING INDEX "+tt.index) || strings.HasPrefix(d, "SEARCH i USING INDEX "+tt.index)
			}
			if !ok {
				t.Errorf("plan of %s is no range scan of %s:\n%s", q, tt.index, strings.Join(plan, "\n"))
			}
		})
	}
}
