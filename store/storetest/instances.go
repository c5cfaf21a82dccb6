package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// fullInstance sets every field CreateInstance stores.
func fullInstance(n int) cairn.Instance {
	in := instance(n, "cap.type.database.postgresql.config", "0.1.0", "team-a", "orders-db")
	in.Alias = "orders"
	in.Labels = map[string]string{"env": "prod", "app.kubernetes.io/name": "orders"}
	in.Annotations = map[string]string{"note": "primary, do not delete", "owner": "team-a@example.com"}
	in.Backend = cairn.BackendRef{ID: id(900), Abstract: false}
	in.LockedBy = "deployer"
	in.Latest = cairn.ResourceVersion{
		ResourceVersion: 1,
		CreatedBy:       "alice",
		CreatedAt:       at(n).Add(time.Millisecond),
		Attributes: []cairn.AttributeRef{
			{Path: "cap.attribute.managed", Revision: "0.1.0"},
			{Path: "cap.attribute.ha", Revision: "1.0.0"},
		},
		Context: json.RawMessage(`{"bucket": "s3://state", "key": "orders"}`),
	}
	return in
}

func testInstanceCreateGet(t *testing.T, s store.Store) {
	full := fullInstance(1)
	bare := instance(2, "cap.type.bare", "1.0.0", "default", "bare")
	create(t, s, full, bare)

	wantFull := full
	wantFull.Uses, wantFull.UsedBy = nil, nil
	wantInstance(t, get(t, s, full.ID), wantFull)
	wantInstance(t, get(t, s, bare.ID), bare)

	got := get(t, s, full.ID)
	if got.Latest.Value != nil {
		t.Errorf("Latest.Value = %s, want nil (the store keeps metadata only)", got.Latest.Value)
	}
	if len(got.Uses) != 0 || len(got.UsedBy) != 0 {
		t.Errorf("Uses, UsedBy = %q, %q; want none", got.Uses, got.UsedBy)
	}

	// The first resource version is stored as version 1.
	rvs, err := s.ResourceVersions(t.Context(), full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != 1 {
		t.Fatalf("ResourceVersions = %d versions, want 1", len(rvs))
	}
	if d := diffVersion(rvs[0], full.Latest); len(d) > 0 {
		t.Fatalf("resource version 1: %s", strings.Join(d, "; "))
	}

	// Uses and UsedBy given to CreateInstance are ignored.
	ignored := instance(3, "cap.type.bare", "1.0.0", "default", "ignored")
	ignored.Uses, ignored.UsedBy = []string{bare.ID}, []string{full.ID}
	create(t, s, ignored)
	if got := get(t, s, ignored.ID); len(got.Uses) != 0 || len(got.UsedBy) != 0 {
		t.Fatalf("Uses, UsedBy = %q, %q; want none", got.Uses, got.UsedBy)
	}
}

func testInstanceCreateDuplicate(t *testing.T, s store.Store) {
	existing := instance(1, "cap.type.db", "0.1.0", "default", "db")
	create(t, s, existing)

	tests := []struct {
		name    string
		in      cairn.Instance
		code    cairn.Code
		mention []string // the message names what is taken
	}{
		{"same id", instance(1, "cap.type.other", "0.1.0", "other", "other"), cairn.CodeAlreadyExists, []string{id(1)}},
		{"same type path, namespace and name", instance(2, "cap.type.db", "0.1.0", "default", "db"), cairn.CodeAlreadyExists, []string{"cap.type.db", "default", "db"}},
		{"same name in another revision", instance(3, "cap.type.db", "0.2.0", "default", "db"), cairn.CodeAlreadyExists, []string{"cap.type.db", "default", "db"}},
		{"same name in another namespace", instance(4, "cap.type.db", "0.1.0", "staging", "db"), "", nil},
		{"same name in another type", instance(5, "cap.type.cache", "0.1.0", "default", "db"), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.CreateInstance(ctx, tt.in) })
			wantCode(t, err, tt.code)
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %q", err, m)
				}
			}
		})
	}
	// The failed creates left the existing instance alone.
	wantInstance(t, get(t, s, existing.ID), existing)
}

func testGetInstances(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s,
		instance(1, "cap.type.b", "0.1.0", "default", "one"),
		instance(2, "cap.type.a", "0.1.0", "default", "two"),
		instance(3, "cap.type.c", "0.1.0", "default", "three"),
	)
	tests := []struct {
		name string
		ids  []string
		want []string
	}{
		{"order of ids kept", []string{id(3), id(1), id(2)}, []string{id(3), id(1), id(2)}},
		{"missing ids skipped", []string{id(9), id(2), id(8), id(1)}, []string{id(2), id(1)}},
		{"only missing", []string{id(9)}, nil},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetInstances(ctx, tt.ids)
			if err != nil {
				t.Fatalf("GetInstances: %v", err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("GetInstances(%q) = %q, want %q", tt.ids, ids(got), tt.want)
			}
			brief, err := s.GetInstancesBrief(ctx, tt.ids)
			if err != nil {
				t.Fatalf("GetInstancesBrief: %v", err)
			}
			if !slices.Equal(ids(brief), tt.want) {
				t.Fatalf("GetInstancesBrief(%q) = %q, want %q", tt.ids, ids(brief), tt.want)
			}
		})
	}
}

func testGetInstancesBrief(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := fullInstance(1)
	create(t, s, full, instance(2, "cap.type.a", "0.1.0", "default", "user"))
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.AddUses(ctx, id(2), id(1))
	}); err != nil {
		t.Fatalf("AddUses: %v", err)
	}
	withRel := get(t, s, id(1))
	brief, err := s.GetInstancesBrief(ctx, []string{id(1)})
	if err != nil || len(brief) != 1 {
		t.Fatalf("GetInstancesBrief = %d instances, %v", len(brief), err)
	}
	if brief[0].Uses != nil || brief[0].UsedBy != nil {
		t.Errorf("brief relations = %q / %q, want nil", brief[0].Uses, brief[0].UsedBy)
	}
	if len(withRel.UsedBy) != 1 {
		t.Fatalf("GetInstances usedBy = %q, want %s", withRel.UsedBy, id(2))
	}
	withRel.Uses, withRel.UsedBy = nil, nil
	wantInstance(t, brief[0], withRel)
	// Through a transaction too.
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetInstancesBrief(ctx, []string{id(1)})
		if err != nil || len(got) != 1 || got[0].UsedBy != nil {
			t.Errorf("tx.GetInstancesBrief = %v, %v", got, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testGetInstanceByName(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	create(t, s, in, instance(2, in.TypeRef.Path, in.TypeRef.Revision, "other", in.Name))

	got, err := s.GetInstanceByName(ctx, in.TypeRef.Path, in.Namespace, in.Name)
	if err != nil {
		t.Fatalf("GetInstanceByName: %v", err)
	}
	want := in
	want.Uses, want.UsedBy = nil, nil
	wantInstance(t, got, want)

	for _, q := range [][3]string{
		{in.TypeRef.Path, "missing", in.Name},
		{in.TypeRef.Path, in.Namespace, "missing"},
		{"cap.type.missing", in.Namespace, in.Name},
	} {
		_, err := s.GetInstanceByName(ctx, q[0], q[1], q[2])
		wantCode(t, err, cairn.CodeNotFound)
	}
}

func testCountInstances(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s,
		instance(1, "cap.type.a", "0.1.0", "default", "a1"),
		instance(2, "cap.type.a", "0.1.0", "team", "a1"),
		instance(3, "cap.type.a", "0.2.0", "default", "a3"),
		instance(4, "cap.type.b", "0.1.0", "default", "b"),
	)
	for _, tt := range []struct {
		ref  cairn.TypeRef
		want int
	}{
		{cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, 2},
		{cairn.TypeRef{Path: "cap.type.a", Revision: "0.2.0"}, 1},
		{cairn.TypeRef{Path: "cap.type.b", Revision: "0.1.0"}, 1},
		{cairn.TypeRef{Path: "cap.type.c", Revision: "0.1.0"}, 0},
	} {
		got, err := s.CountInstances(ctx, tt.ref)
		if err != nil {
			t.Fatalf("CountInstances(%s): %v", tt.ref, err)
		}
		if got != tt.want {
			t.Errorf("CountInstances(%s) = %d, want %d", tt.ref, got, tt.want)
		}
	}
}

// testClusterScoped: an instance of a Cluster Type has the empty namespace
// (cairn.ScopeCluster); it is read, listed, selected and logged with it.
func testClusterScoped(t *testing.T, s store.Store) {
	ctx := t.Context()
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := instance(1, "dev.cairn.test.env", "1.0.0", "", "small-infra")
	in.Labels = map[string]string{"foo-key": "bar-value"}
	create(t, s, in, instance(2, "cap.type.other", "0.1.0", "default", "small-infra"))

	got, err := s.GetInstanceByName(ctx, in.TypeRef.Path, "", in.Name)
	if err != nil || got.ID != in.ID || got.Namespace != "" {
		t.Fatalf("GetInstanceByName(%s, \"\", %s) = %s %q, %v", in.TypeRef.Path, in.Name, got.ID, got.Namespace, err)
	}
	_, err = s.GetInstanceByName(ctx, in.TypeRef.Path, "default", in.Name)
	wantCode(t, err, cairn.CodeNotFound)
	sel := []labels.Requirement{{Key: "foo-key", Operator: labels.Equals, Values: []string{"bar-value"}}}
	for _, tc := range []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"every namespace", store.InstanceFilter{Name: in.Name}, []string{in.ID, id(2)}},
		{"namespace default", store.InstanceFilter{Namespace: "default", Name: in.Name}, []string{id(2)}},
		{"label selector", store.InstanceFilter{Labels: sel}, []string{in.ID}},
	} {
		list, err := s.ListInstances(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var ids []string
		for _, l := range list {
			ids = append(ids, l.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: ListInstances = %v, want %v", tc.name, ids, tc.want)
		}
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, in.ID) })
	all := changeLog(t, s, start)
	if del := all[len(all)-1]; del.InstanceID != in.ID || del.Namespace != "" || del.Name != in.Name {
		t.Errorf("DELETED change = %s %q/%s, want %s \"\"/%s", del.InstanceID, del.Namespace, del.Name, in.ID, in.Name)
	}
}
