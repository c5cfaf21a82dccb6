package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// benchValue is a typical small configuration document (~300 bytes).
var benchValue = json.RawMessage(`{"host":"postgresql.prod.svc.cluster.local","port":5432,"defaultDBName":"mattermost",
"superuser":{"username":"postgres","password":"s3cr3t-value-of-some-length"},"sslMode":"require",
"labels":{"team":"platform","env":"prod"},"replicas":3}`)

func benchHub(b *testing.B) (*hub.Hub, context.Context) {
	b.Helper()
	ctx := cairn.WithActor(context.Background(), "bench")
	h, err := hub.New(ctx, hub.Config{Store: openStore(b, "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.CreateType(ctx, cairn.Type{Path: cfgType.Path, Revision: cfgType.Revision, JSONSchema: json.RawMessage(`{
		"type":"object","required":["host","port"],
		"properties":{"host":{"type":"string"},"port":{"type":"integer"},"defaultDBName":{"type":"string"},
		"superuser":{"type":"object","properties":{"username":{"type":"string"},"password":{"type":"string"}}}}}`)}); err != nil {
		b.Fatal(err)
	}
	return h, ctx
}

func benchCreate(b *testing.B, h *hub.Hub, ctx context.Context, n int, prefix string) []string {
	b.Helper()
	ins := make([]hub.NewInstance, n)
	for i := range ins {
		ins[i] = hub.NewInstance{TypeRef: cfgType, Name: fmt.Sprintf("%s-%d", prefix, i), Value: benchValue,
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

func BenchmarkCreate(b *testing.B) {
	h, ctx := benchHub(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		benchCreate(b, h, ctx, 1, fmt.Sprint("c", i))
		i++
	}
}

func BenchmarkCreateBatch1000(b *testing.B) {
	h, ctx := benchHub(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		benchCreate(b, h, ctx, 1000, fmt.Sprint("b", i))
		i++
	}
}

func BenchmarkGetWithValue(b *testing.B) {
	h, ctx := benchHub(b)
	id := benchCreate(b, h, ctx, 1, "g")[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.GetInstance(ctx, id, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList1000(b *testing.B) {
	for _, withValues := range []bool{false, true} {
		b.Run(fmt.Sprintf("values=%t", withValues), func(b *testing.B) {
			h, ctx := benchHub(b)
			benchCreate(b, h, ctx, 1000, "l")
			b.ReportAllocs()
			for b.Loop() {
				list, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: cfgType.Path}, withValues)
				if err != nil || len(list) != 1000 {
					b.Fatalf("list: %d, %v", len(list), err)
				}
			}
		})
	}
}

func BenchmarkUpdate(b *testing.B) {
	h, ctx := benchHub(b)
	id := benchCreate(b, h, ctx, 1, "u")[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: benchValue}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLockUnlock(b *testing.B) {
	h, ctx := benchHub(b)
	id := benchCreate(b, h, ctx, 1, "k")[0]
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
