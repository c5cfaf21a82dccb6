// Package hubbench holds the hub's core benchmarks, run on any store: the
// hub's own benchmarks run them on SQLite (hub/bench_test.go) and
// store/postgres runs them on PostgreSQL, so the figures compare.
package hubbench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// Opener opens a fresh, empty store for one benchmark, closed when b ends.
type Opener struct {
	// Kind is the hub's StoreKind ("sqlite", "postgresql").
	Kind string
	Open func(b *testing.B) store.Store
}

// All runs every benchmark as a sub-benchmark of b.
func All(b *testing.B, o Opener) {
	b.Run("Create", func(b *testing.B) { Create(b, o) })
	b.Run("CreateBatch1000", func(b *testing.B) { CreateBatch1000(b, o) })
	b.Run("GetWithValue", func(b *testing.B) { GetWithValue(b, o) })
	b.Run("List1000", func(b *testing.B) { List1000(b, o) })
	b.Run("Update", func(b *testing.B) { Update(b, o) })
	b.Run("LockUnlock", func(b *testing.B) { LockUnlock(b, o) })
}

var typeRef = cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"}

// value is a typical small configuration document (~300 bytes).
var value = json.RawMessage(`{"host":"postgresql.prod.svc.cluster.local","port":5432,"defaultDBName":"mattermost",
"superuser":{"username":"postgres","password":"s3cr3t-value-of-some-length"},"sslMode":"require",
"labels":{"team":"platform","env":"prod"},"replicas":3}`)

func newHub(b *testing.B, o Opener) (*hub.Hub, context.Context) {
	b.Helper()
	ctx := cairn.WithActor(context.Background(), "bench")
	h, err := hub.New(ctx, hub.Config{Store: o.Open(b), StoreKind: o.Kind})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.CreateType(ctx, cairn.Type{Path: typeRef.Path, Revision: typeRef.Revision, JSONSchema: json.RawMessage(`{
		"type":"object","required":["host","port"],
		"properties":{"host":{"type":"string"},"port":{"type":"integer"},"defaultDBName":{"type":"string"},
		"superuser":{"type":"object","properties":{"username":{"type":"string"},"password":{"type":"string"}}}}}`)}); err != nil {
		b.Fatal(err)
	}
	return h, ctx
}

func create(b *testing.B, h *hub.Hub, ctx context.Context, n int, prefix string) []string {
	b.Helper()
	ins := make([]hub.NewInstance, n)
	for i := range ins {
		ins[i] = hub.NewInstance{TypeRef: typeRef, Name: fmt.Sprintf("%s-%d", prefix, i), Value: value,
			Labels: map[string]string{"env": "prod"}}
	}
	out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: ins})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i, c := range out {
		ids[i] = c.ID
	}
	return ids
}

// Create creates one instance per iteration: resolve the backend, validate,
// one transaction (instance, version, value, uses edge).
func Create(b *testing.B, o Opener) {
	h, ctx := newHub(b, o)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		create(b, h, ctx, 1, fmt.Sprint("c", i))
		i++
	}
}

// CreateBatch1000 creates 1,000 instances in one atomic call per iteration.
func CreateBatch1000(b *testing.B, o Opener) {
	h, ctx := newHub(b, o)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		create(b, h, ctx, 1000, fmt.Sprint("b", i))
		i++
	}
}

// GetWithValue reads one instance and its value from the built-in backend.
func GetWithValue(b *testing.B, o Opener) {
	h, ctx := newHub(b, o)
	id := create(b, h, ctx, 1, "g")[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.GetInstance(ctx, id, true); err != nil {
			b.Fatal(err)
		}
	}
}

// List1000 lists 1,000 instances with labels and relations, without and
// with their values.
func List1000(b *testing.B, o Opener) {
	for _, withValues := range []bool{false, true} {
		b.Run(fmt.Sprintf("values=%t", withValues), func(b *testing.B) {
			h, ctx := newHub(b, o)
			create(b, h, ctx, 1000, "l")
			b.ReportAllocs()
			for b.Loop() {
				list, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: typeRef.Path}, withValues)
				if err != nil || len(list) != 1000 {
					b.Fatalf("list: %d, %v", len(list), err)
				}
			}
		})
	}
}

// Update adds a resource version with a new value per iteration.
func Update(b *testing.B, o Opener) {
	h, ctx := newHub(b, o)
	id := create(b, h, ctx, 1, "u")[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: value}}); err != nil {
			b.Fatal(err)
		}
	}
}

// LockUnlock locks and unlocks one instance: two transactions.
func LockUnlock(b *testing.B, o Opener) {
	h, ctx := newHub(b, o)
	id := create(b, h, ctx, 1, "k")[0]
	ids := []string{id}
	b.ReportAllocs()
	for b.Loop() {
		if err := h.LockInstances(ctx, ids, "owner"); err != nil {
			b.Fatal(err)
		}
		if err := h.UnlockInstances(ctx, ids, "owner"); err != nil {
			b.Fatal(err)
		}
	}
}
