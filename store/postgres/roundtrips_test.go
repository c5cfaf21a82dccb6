package postgres_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// ChangesWithInstances answers, in one round trip, what Changes,
// GetInstances and Values answer one after the other on a quiet store:
// the same changes, the instances they name (a deleted one absent) and
// the built-in values of their latest versions.
func TestChangesWithInstancesMatchesSeparateReads(t *testing.T) {
	ctx := t.Context()
	st, h, typ := gadgetHub(t)
	mid, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"g1", "g2", "g3"} {
		c, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: name, Namespace: "default",
			TypeRef: typ.Ref(), Value: json.RawMessage(`{"n":"` + name + `"}`), Labels: map[string]string{"k": name}}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c[0].Instance.ID)
	}
	if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: ids[1], Value: json.RawMessage(`{"n":"changed"}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteInstance(ctx, ids[2], ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after int64
		limit int
	}{{mid, 1000}, {mid, 2}, {0, 1000}} {
		cs, found, err := st.ChangesWithInstances(ctx, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		want, err := st.Changes(ctx, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cs, want) {
			t.Fatalf("after %d limit %d: changes %+v, want %+v", tc.after, tc.limit, cs, want)
		}
		var named []string
		for _, c := range cs {
			if !slices.Contains(named, c.InstanceID) {
				named = append(named, c.InstanceID)
			}
		}
		wantFound, err := st.GetInstances(ctx, named)
		if err != nil {
			t.Fatal(err)
		}
		var keys []store.ValueKey
		for _, in := range wantFound {
			if in.Backend.Abstract {
				keys = append(keys, store.ValueKey{InstanceID: in.ID, ResourceVersion: in.Latest.ResourceVersion})
			}
		}
		values, err := st.Values(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 && tc.after == mid {
			t.Fatal("no instance of the built-in backend among the changed ones: the values go untested")
		}
		byID := map[string]cairn.Instance{}
		for _, in := range found {
			byID[in.ID] = in
		}
		if len(found) != len(wantFound) {
			t.Fatalf("after %d limit %d: %d instances, want %d", tc.after, tc.limit, len(found), len(wantFound))
		}
		if _, ok := byID[ids[2]]; ok {
			t.Fatalf("the deleted instance %s was found", ids[2])
		}
		for _, w := range wantFound {
			got, ok := byID[w.ID]
			if !ok {
				t.Fatalf("after %d limit %d: instance %s missing", tc.after, tc.limit, w.ID)
			}
			for j, k := range keys {
				if k.InstanceID == w.ID {
					w.Latest.Value = values[j]
				}
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("instance %s:\n got %+v\nwant %+v", w.ID, got, w)
			}
		}
	}
	if _, _, err := st.ChangesWithInstances(ctx, 1<<40, 10); err != nil {
		t.Fatalf("after the end: %v", err)
	}
}

// A transaction that runs no statement commits without a round trip, and
// one whose function fails leaves nothing behind (BEGIN goes out with the
// first statement).
func TestUpdateBeginsWithFirstStatement(t *testing.T) {
	pgtest.DSN(t)
	ctx := t.Context()
	st := pgtest.Open(t)
	if err := st.Update(ctx, func(context.Context, store.Tx) error { return nil }); err != nil {
		t.Fatalf("empty transaction: %v", err)
	}
	ref := cairn.TypeRef{Path: "org.example.thing", Revision: "0.1.0"}
	typ := cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: []byte(`{"type":"object"}`)}
	boom := cairn.Errorf(cairn.CodeInvalid, "boom")
	err := st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, typ); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("got %v, want the function's error", err)
	}
	if _, err := st.GetType(ctx, ref); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("type after a failed transaction: %v, want not found", err)
	}
	if err := st.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.CreateType(ctx, typ) }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetType(ctx, ref); err != nil {
		t.Fatalf("type after a committed transaction: %v", err)
	}
}

// Writes to an instance the transaction holds locked go out with its next
// statement: a read after them sees them, the last one before the commit
// is committed, the change is logged once; a write to an instance not
// locked still answers at once.
func TestHeldWritesKeepOrder(t *testing.T) {
	ctx := t.Context()
	st, h, typ := gadgetHub(t)
	c, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "g", Namespace: "default",
		TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := c[0].Instance.ID
	before, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := json.RawMessage(`{"phase":"Ready"}`)
	managed := json.RawMessage(`[{"manager":"test"}]`)
	err = st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetInstancesBrief(ctx, []string{id}); err != nil {
			return err
		}
		if err := tx.SetMetadata(ctx, id, map[string]string{"a": "b"}, map[string]string{"n": "m"}); err != nil {
			return err
		}
		if err := tx.SetStatus(ctx, id, status); err != nil {
			return err
		}
		got, err := tx.GetInstancesBrief(ctx, []string{id})
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Labels["a"] != "b" || got[0].Annotations["n"] != "m" || string(got[0].Status) != string(status) {
			t.Errorf("read in the transaction after the writes: %+v", got)
		}
		if err := tx.SetStatus(ctx, "no-such-instance", status); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("SetStatus of a missing instance: %v, want not found at once", err)
		}
		return tx.SetManagedFields(ctx, id, managed)
	})
	// The failed SetStatus was ignored above; the transaction goes on.
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetInstances(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels["a"] != "b" || string(got[0].Status) != string(status) || string(got[0].ManagedFields) != string(managed) {
		t.Fatalf("after the commit: %+v", got)
	}
	cs, err := st.Changes(ctx, before, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].InstanceID != id || cs[0].Kind != store.Modified {
		t.Fatalf("changes: %+v, want one MODIFIED of %s", cs, id)
	}
}

// gadgetHub is a hub on a new PostgreSQL store with one Type registered.
func gadgetHub(t *testing.T) (*postgres.Store, *hub.Hub, cairn.Type) {
	t.Helper()
	pgtest.DSN(t)
	st := pgtest.Open(t)
	h, err := hub.New(t.Context(), hub.Config{Store: st, StoreKind: "postgresql"})
	if err != nil {
		t.Fatal(err)
	}
	typ, err := h.CreateType(t.Context(), cairn.Type{Path: "org.example.gadget", Revision: "0.1.0", JSONSchema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return st, h, typ
}
