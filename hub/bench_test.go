package hub_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/hub/hubbench"
	"github.com/cairn-dev/cairn/store"
)

// The hub's core benchmarks on SQLite; the same run on PostgreSQL in
// store/postgres (BenchmarkHub).

func sqliteBench() hubbench.Opener {
	return hubbench.Opener{Kind: "sqlite", Open: func(b *testing.B) store.Store { return openStore(b, "bench.db") }}
}

func BenchmarkCreate(b *testing.B)          { hubbench.Create(b, sqliteBench()) }
func BenchmarkCreateBatch1000(b *testing.B) { hubbench.CreateBatch1000(b, sqliteBench()) }
func BenchmarkGetWithValue(b *testing.B)    { hubbench.GetWithValue(b, sqliteBench()) }
func BenchmarkList1000(b *testing.B)        { hubbench.List1000(b, sqliteBench()) }
func BenchmarkUpdate(b *testing.B)          { hubbench.Update(b, sqliteBench()) }
func BenchmarkLockUnlock(b *testing.B)      { hubbench.LockUnlock(b, sqliteBench()) }

// BenchmarkResolveBackend resolves a backend instance with a context
// schema (what every operation on an instance does for its backend), with
// the read cache off (two store reads, decode and check the value) and on
// (one position check; decoded once per resource version).
func BenchmarkResolveBackend(b *testing.B) {
	for _, tc := range []struct {
		name    string
		noCache bool
	}{{"store", true}, {"cached", false}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := cairn.WithActor(context.Background(), "bench")
			h, err := hub.New(ctx, hub.Config{Store: openStore(b, "bench.db"), NoReadCache: tc.noCache})
			if err != nil {
				b.Fatal(err)
			}
			out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				Alias:      "ext",
				TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
				Value:      json.RawMessage(`{"url":"test://ext","acceptValue":true,"contextSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`),
				Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}},
			}}})
			if err != nil {
				b.Fatal(err)
			}
			id := out[0].ID
			for b.Loop() {
				sb, err := h.StorageBackend(ctx, id)
				if err != nil || sb.URL != "test://ext" {
					b.Fatal(sb, err)
				}
			}
		})
	}
}
