// Package storetest is the contract suite of store.Store. Every
// implementation runs it unchanged:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
//	}
//
// The suite only uses what store.Store promises. Ids are UUIDs, timestamps
// have microsecond precision and JSON is compared by meaning, not bytes, so a
// PostgreSQL store with uuid, timestamptz and jsonb columns passes it too.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Run runs every contract test as a subtest; open must return a new, empty
// store for each and arrange for it to be closed (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Types/CreateGet", testTypeCreateGet},
		{"Types/List", testTypeList},
		{"Types/Delete", testTypeDelete},
		{"Types/DeleteUsed", testTypeDeleteUsed},
		{"Types/Matches", testTypeMatches},
		{"Instances/CreateGet", testInstanceCreateGet},
		{"Instances/CreateDuplicate", testInstanceCreateDuplicate},
		{"Instances/GetInstances", testGetInstances},
		{"Instances/GetInstancesBrief", testGetInstancesBrief},
		{"Instances/GetByName", testGetInstanceByName},
		{"Instances/ClusterScoped", testClusterScoped},
		{"Instances/Count", testCountInstances},
		{"Instances/ListFilters", testListFilters},
		{"Instances/ListRelations", testListRelations},
		{"Versions/Add", testAddResourceVersion},
		{"Versions/FiltersFollowLatest", testFiltersFollowLatest},
		{"Metadata/Set", testSetMetadata},
		{"Status/Set", testSetStatus},
		{"Status/Create", testCreateWithStatus},
		{"Uses/Remove", testRemoveUses},
		{"Locks/SetLockedBy", testSetLockedBy},
		{"Uses/Add", testAddUses},
		{"Uses/Order", testUsesOrder},
		{"Uses/Backend", testBackendUses},
		{"Delete/Instance", testDeleteInstance},
		{"Delete/UsedBy", testDeleteUsedBy},
		{"Values/PutGet", testValues},
		{"Values/Batch", testValuesBatch},
		{"Values/Delete", testDeleteValues},
		{"Values/Lock", testValueLock},
		{"Tx/Rollback", testRollback},
		{"Tx/ReadOwnWrites", testReadOwnWrites},
		{"Tx/Timestamps", testTimestamps},
		{"Tx/JSON", testJSONRoundTrip},
		{"Concurrency/ResourceVersions", testConcurrentVersions},
		{"Concurrency/Lock", testConcurrentLock},
		{"Concurrency/DeleteTypeCreate", testConcurrentDeleteTypeCreate},
		{"Changes/Log", testChanges},
		{"Changes/OnePerTransaction", testOneChangePerTx},
		{"Changes/LastSeqInTransaction", testLastSeqInTx},
		{"Instances/ListPaging", testListPaging},
		{"Instances/ListOrders", testListOrders},
		{"Instances/ListOrderPagingAcrossWrites", testListOrderPagingAcrossWrites},
		{"Intents/Journal", testIntents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// id returns the n-th test id, a valid UUID.
func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// base is the suite's clock origin, with microsecond precision only.
func base() time.Time { return time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC) }

// at returns base plus n seconds.
func at(n int) time.Time { return base().Add(time.Duration(n) * time.Second) }

// instance returns a minimal valid instance at resource version 1.
func instance(n int, typePath, revision, namespace, name string) cairn.Instance {
	return cairn.Instance{
		ID:        id(n),
		TypeRef:   cairn.TypeRef{Path: typePath, Revision: revision},
		Namespace: namespace,
		Name:      name,
		Backend:   cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		CreatedAt: at(n),
		Latest:    cairn.ResourceVersion{ResourceVersion: 1, CreatedBy: "alice", CreatedAt: at(n)},
	}
}

// update runs fn in a transaction and fails the test on error.
func update(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// create stores instances in one transaction.
func create(t *testing.T, s store.Store, ins ...cairn.Instance) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, in := range ins {
			if err := tx.CreateInstance(ctx, in); err != nil {
				return fmt.Errorf("create %s: %w", in.ID, err)
			}
		}
		return nil
	})
}

// try runs one Tx call in its own transaction and returns its error.
func try(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) error {
	t.Helper()
	return s.Update(t.Context(), fn)
}

func wantCode(t *testing.T, err error, code cairn.Code) {
	t.Helper()
	if got := cairn.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (error: %v)", got, code, err)
	}
}

func wantIDs(t *testing.T, err error, want ...string) {
	t.Helper()
	var got []string
	for _, e := range cairn.Errors(err) {
		got = append(got, e.IDs...)
	}
	if !sameSet(got, want) {
		t.Fatalf("error ids = %q, want %q (error: %v)", got, want, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// get returns one instance through a fresh read, failing when absent.
func get(t *testing.T, r store.Reader, id string) cairn.Instance {
	t.Helper()
	got, err := r.GetInstances(t.Context(), []string{id})
	if err != nil {
		t.Fatalf("GetInstances(%s): %v", id, err)
	}
	if len(got) != 1 {
		t.Fatalf("GetInstances(%s) returned %d instances, want 1", id, len(got))
	}
	return got[0]
}

func ids(ins []cairn.Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.ID
	}
	return out
}

// jsonEqual compares documents by meaning; nil equals only nil.
func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// diffInstance lists the fields in which got differs from want.
func diffInstance(got, want cairn.Instance) []string {
	var d []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("ID", got.ID == want.ID, got.ID, want.ID)
	check("TypeRef", got.TypeRef == want.TypeRef, got.TypeRef, want.TypeRef)
	check("Namespace", got.Namespace == want.Namespace, got.Namespace, want.Namespace)
	check("Name", got.Name == want.Name, got.Name, want.Name)
	check("Alias", got.Alias == want.Alias, got.Alias, want.Alias)
	check("Labels", maps.Equal(got.Labels, want.Labels), got.Labels, want.Labels)
	check("Annotations", maps.Equal(got.Annotations, want.Annotations), got.Annotations, want.Annotations)
	check("Backend", got.Backend == want.Backend, got.Backend, want.Backend)
	check("LockedBy", got.LockedBy == want.LockedBy, got.LockedBy, want.LockedBy)
	check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt), got.CreatedAt, want.CreatedAt)
	check("Uses", slices.Equal(got.Uses, want.Uses), got.Uses, want.Uses)
	check("UsedBy", slices.Equal(got.UsedBy, want.UsedBy), got.UsedBy, want.UsedBy)
	check("Status", jsonEqual(got.Status, want.Status), string(got.Status), string(want.Status))
	check("ManagedFields", jsonEqual(got.ManagedFields, want.ManagedFields), string(got.ManagedFields), string(want.ManagedFields))
	for _, s := range diffVersion(got.Latest, want.Latest) {
		d = append(d, "Latest."+s)
	}
	return d
}

func diffVersion(got, want cairn.ResourceVersion) []string {
	var d []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("ResourceVersion", got.ResourceVersion == want.ResourceVersion, got.ResourceVersion, want.ResourceVersion)
	check("CreatedBy", got.CreatedBy == want.CreatedBy, got.CreatedBy, want.CreatedBy)
	check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt), got.CreatedAt, want.CreatedAt)
	check("Attributes", slices.Equal(got.Attributes, want.Attributes), got.Attributes, want.Attributes)
	check("Value", jsonEqual(got.Value, want.Value), string(got.Value), string(want.Value))
	check("Context", jsonEqual(got.Context, want.Context), string(got.Context), string(want.Context))
	return d
}

func wantInstance(t *testing.T, got, want cairn.Instance) {
	t.Helper()
	if d := diffInstance(got, want); len(d) > 0 {
		t.Fatalf("instance %s:\n\t%s", want.ID, strings.Join(d, "\n\t"))
	}
}
