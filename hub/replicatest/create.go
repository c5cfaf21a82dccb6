package replicatest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// testCreateAnswerAsStored: the instance a create answers with (which the
// hub assembles rather than reads back) is the one the store holds, field
// by field, for every shape of create; and the read cache, handed the
// created instances, answers consistent reads with what the store holds,
// relations included, right after each create and after a batch of
// concurrent creates some of which fail.
func testCreateAnswerAsStored(t *testing.T, db Database) {
	st := db.Open(t)
	h, err := hub.New(ctx(), hub.Config{Store: st, StoreKind: db.Kind})
	if err != nil {
		t.Fatal(err)
	}
	// A consistent read first, so that the cache is loaded and takes what
	// the creates hand it.
	if _, err := h.GetInstance(ctx(), cairn.BuiltinBackendID, false); err != nil {
		t.Fatal(err)
	}
	wantStored := func(t *testing.T, got cairn.Instance) {
		t.Helper()
		found, err := st.GetInstancesBrief(ctx(), []string{got.ID})
		if err != nil || len(found) != 1 {
			t.Fatalf("read %s back: %v %v", got.ID, found, err)
		}
		want := found[0]
		want.Uses = []string{want.Backend.ID}
		got.Latest.Value = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("the create answered\n%+v\nthe store holds\n%+v", got, want)
		}
	}
	wantCached := func(t *testing.T, ids ...string) {
		t.Helper()
		for _, id := range ids {
			got, err := h.GetInstance(ctx(), id, true)
			if err != nil {
				t.Fatalf("consistent read of %s: %v", id, err)
			}
			found, err := st.GetInstances(ctx(), []string{id})
			if err != nil || len(found) != 1 {
				t.Fatalf("read %s: %v %v", id, found, err)
			}
			want := found[0]
			if want.Latest.Value, err = st.Value(ctx(), id, want.Latest.ResourceVersion); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("a consistent read of %s gave\n%+v\nthe store holds\n%+v", id, got, want)
			}
		}
	}

	cases := []struct {
		name string
		in   hub.NewInstance
	}{
		{"bare", hub.NewInstance{TypeRef: typeRef, Value: json.RawMessage(`{"n":1}`)}},
		{"labels and annotations", hub.NewInstance{TypeRef: typeRef, Name: "labelled",
			Labels: map[string]string{"team": "a", "tier": "b"}, Annotations: map[string]string{"note": "x y"},
			Value: json.RawMessage(` { "n" : 2 , "s": "a b" } `)}},
		{"empty maps and lists", hub.NewInstance{TypeRef: typeRef, Name: "empty",
			Labels: map[string]string{}, Annotations: map[string]string{}, Attributes: []cairn.AttributeRef{}}},
		{"attributes and managed fields", hub.NewInstance{TypeRef: typeRef, Name: "owned", Alias: "owned-alias",
			Attributes:    []cairn.AttributeRef{{Path: "cap.attribute.replicatest.a", Revision: "0.1.0"}},
			ManagedFields: json.RawMessage(`[ {"manager": "m", "fieldsV1": {"f:spec": { }}, "note": "a \" b"} ]`),
			CreatedBy:     "someone", Value: json.RawMessage(`{}`)}},
		{"other namespace", hub.NewInstance{TypeRef: typeRef, Namespace: "other", Name: "elsewhere", Value: json.RawMessage(`null`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{tc.in}})
			if err != nil {
				t.Fatal(err)
			}
			wantStored(t, out[0].Instance)
			wantCached(t, out[0].ID, cairn.BuiltinBackendID)
		})
	}

	t.Run("seen by a watch", func(t *testing.T) {
		var created hub.Created
		c := watchChange(t, h, "the create", func() string {
			out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: typeRef, Name: "watched",
				Labels: map[string]string{"w": "1"}, Value: json.RawMessage(`{"w":1}`)}}})
			if err != nil {
				t.Fatal(err)
			}
			created = out[0]
			return created.ID
		})
		if c.Kind != store.Added || c.Seq != created.Instance.Seq {
			t.Fatalf("change = %+v, want ADDED at %d", c, created.Instance.Seq)
		}
		wantCached(t, created.ID)
	})

	t.Run("batch with relations", func(t *testing.T) {
		out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{
			{Alias: "a", TypeRef: typeRef, Value: json.RawMessage(`{"n":1}`)},
			{Alias: "b", TypeRef: typeRef, Value: json.RawMessage(`{"n":2}`), Labels: map[string]string{"x": "y"}},
		}, UsesRelations: []hub.UsesRelation{{From: "a", To: "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		wantCached(t, out[0].ID, out[1].ID, cairn.BuiltinBackendID)
	})

	t.Run("concurrent, some refused", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ids []string
		refused := 0
		for i := range 16 {
			wg.Go(func() {
				// Every fourth takes a name another one has: one of each
				// pair is refused by the store, inside a group commit.
				name := fmt.Sprintf("c-%d", i)
				if i%4 == 3 {
					name = fmt.Sprintf("c-%d", i-1)
				}
				out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{
					TypeRef: typeRef, Name: name, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case cairn.HasCode(err, cairn.CodeAlreadyExists):
					refused++
				case err != nil:
					t.Errorf("create %d: %v", i, err)
				default:
					ids = append(ids, out[0].ID)
				}
			})
		}
		wg.Wait()
		if refused != 4 || len(ids) != 12 {
			t.Fatalf("%d created, %d refused; want 12 and 4", len(ids), refused)
		}
		wantCached(t, append(ids, cairn.BuiltinBackendID)...)
		f := store.InstanceFilter{TypePath: typeRef.Path}
		list, err := h.ListInstances(ctx(), f, false)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := st.ListInstances(ctx(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != len(stored) {
			t.Fatalf("a consistent list has %d instances, the store %d", len(list), len(stored))
		}
		for i := range list {
			if !reflect.DeepEqual(list[i], stored[i]) {
				t.Fatalf("item %d of a consistent list\n%+v\nthe store's\n%+v", i, list[i], stored[i])
			}
		}
	})
}
