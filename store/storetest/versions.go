package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func testAddResourceVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	create(t, s, in)
	v2 := cairn.ResourceVersion{
		ResourceVersion: 2,
		CreatedBy:       "bob",
		CreatedAt:       at(10),
		Attributes:      []cairn.AttributeRef{{Path: "cap.attribute.new", Revision: "0.2.0"}},
		Context:         json.RawMessage(`{"key": "orders-v2"}`),
	}
	v3 := cairn.ResourceVersion{ResourceVersion: 3, CreatedBy: "carol", CreatedAt: at(20)}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddResourceVersion(ctx, in.ID, v2) })
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddResourceVersion(ctx, in.ID, v3) })

	if d := diffVersion(get(t, s, in.ID).Latest, v3); len(d) > 0 {
		t.Fatalf("Latest: %s", strings.Join(d, "; "))
	}
	all, err := s.ResourceVersions(ctx, in.ID)
	if err != nil {
		t.Fatalf("ResourceVersions: %v", err)
	}
	want := []cairn.ResourceVersion{in.Latest, v2, v3}
	if len(all) != len(want) {
		t.Fatalf("ResourceVersions = %d versions, want %d", len(all), len(want))
	}
	for i := range want {
		if d := diffVersion(all[i], want[i]); len(d) > 0 {
			t.Errorf("version %d: %s", i+1, strings.Join(d, "; "))
		}
		one, err := s.ResourceVersion(ctx, in.ID, want[i].ResourceVersion)
		if err != nil {
			t.Fatalf("ResourceVersion(%d): %v", i+1, err)
		}
		if d := diffVersion(one, want[i]); len(d) > 0 {
			t.Errorf("ResourceVersion(%d): %s", i+1, strings.Join(d, "; "))
		}
	}

	// Several instances' histories in one read; missing ids are absent.
	other := instance(2, "cap.type.other", "0.1.0", "default", "other")
	create(t, s, other)
	many, err := s.ResourceVersionsOf(ctx, []string{other.ID, in.ID, id(99)})
	if err != nil {
		t.Fatalf("ResourceVersionsOf: %v", err)
	}
	if len(many) != 2 || len(many[in.ID]) != 3 || len(many[other.ID]) != 1 {
		t.Fatalf("ResourceVersionsOf = %d instances (%d, %d versions), want 2 (3, 1)", len(many), len(many[in.ID]), len(many[other.ID]))
	}
	for i := range want {
		if d := diffVersion(many[in.ID][i], want[i]); len(d) > 0 {
			t.Errorf("ResourceVersionsOf version %d: %s", i+1, strings.Join(d, "; "))
		}
	}
	if got, err := s.ResourceVersionsOf(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("ResourceVersionsOf(nil) = %v, %v", got, err)
	}

	t.Run("not latest+1", func(t *testing.T) {
		for _, rv := range []int{0, 1, 3, 5, -1} {
			err := try(t, s, func(ctx context.Context, tx store.Tx) error {
				return tx.AddResourceVersion(ctx, in.ID, cairn.ResourceVersion{ResourceVersion: rv, CreatedAt: at(30)})
			})
			wantCode(t, err, cairn.CodeConflict)
		}
		if got := get(t, s, in.ID).Latest.ResourceVersion; got != 3 {
			t.Fatalf("latest after conflicts = %d, want 3", got)
		}
	})
	t.Run("unknown instance", func(t *testing.T) {
		err := try(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.AddResourceVersion(ctx, id(99), cairn.ResourceVersion{ResourceVersion: 2, CreatedAt: at(30)})
		})
		wantCode(t, err, cairn.CodeNotFound)
		_, err = s.ResourceVersions(ctx, id(99))
		wantCode(t, err, cairn.CodeNotFound)
		_, err = s.ResourceVersion(ctx, id(99), 1)
		wantCode(t, err, cairn.CodeNotFound)
	})
	t.Run("unknown revision", func(t *testing.T) {
		for _, rv := range []int{0, 4} {
			_, err := s.ResourceVersion(ctx, in.ID, rv)
			wantCode(t, err, cairn.CodeNotFound)
		}
	})
}

// testFiltersFollowLatest checks that attribute and createdBy filters look
// at the latest resource version only.
func testFiltersFollowLatest(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := instance(1, "cap.type.a", "0.1.0", "default", "a")
	in.Latest.Attributes = []cairn.AttributeRef{{Path: "cap.attr.old", Revision: "0.1.0"}}
	create(t, s, in, instance(2, "cap.type.a", "0.1.0", "default", "b"))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AddResourceVersion(ctx, in.ID, cairn.ResourceVersion{
			ResourceVersion: 2,
			CreatedBy:       "bob",
			CreatedAt:       at(10),
			Attributes:      []cairn.AttributeRef{{Path: "cap.attr.new", Revision: "0.2.0"}},
		})
	})
	tests := []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"old attribute gone", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.old"}}}, nil},
		{"old attribute excluded matches", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.old", Exclude: true}}}, []string{id(2), id(1)}},
		{"new attribute", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.new", Revision: "0.2.0"}}}, []string{id(1)}},
		{"new creator", store.InstanceFilter{CreatedBy: "bob"}, []string{id(1)}},
		{"first creator only on the other", store.InstanceFilter{CreatedBy: "alice"}, []string{id(2)}},
	}
	for _, tt := range tests {
		got, err := s.ListInstances(ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(ids(got), tt.want) {
			t.Errorf("%s: ListInstances = %q, want %q", tt.name, ids(got), tt.want)
		}
	}
}
