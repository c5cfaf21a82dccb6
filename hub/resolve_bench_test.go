package hub

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkResolveBackend resolves a backend instance with a context
// schema, as every operation on an instance does for its backend, two ways
// alternately in one loop (A B B A): "store" reads the instance from the
// store each time, as resolution did before the kept backends (the
// decoding kept by resource version either way), and "kept" resolves as an
// operation does now (the store's change-log position, then the kept
// backend). It reports both per-resolution costs and their ratio
// (store-per-kept). With a commit between resolutions (not timed) the
// position moves every time and "kept" reads the changes in between.
func BenchmarkResolveBackend(b *testing.B) {
	ctx, h := benchHub(b)
	out, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{
		Alias:      "ext",
		TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
		Value:      json.RawMessage(`{"url":"test://ext","acceptValue":true,"contextSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}},
	}, {
		Alias:   "other",
		TypeRef: cairn.TypeRef{Path: "cap.type.test.config", Revision: "0.1.0"},
		Value:   json.RawMessage(`{"n":0}`),
	}}})
	if err != nil {
		b.Fatal(err)
	}
	id, other := out[0].ID, out[1].ID
	check := func(rb *resolvedBackend, err error) {
		if err != nil || rb.URL != "test://ext" || rb.contextSchema == nil {
			b.Fatal(rb, err)
		}
	}
	storeVsKept(b, ctx, h, other,
		func() { check(h.readBackend(ctx, id)) },
		func() { check(h.resolveBackend(ctx, id, 0, false)) })
}

// storeVsKept runs readStore and readKept alternately in one loop (A B B
// A: each goes first every other time, as the first read after a commit
// pays for SQLite's new snapshot), idle and with a commit to instance
// other between rounds (not timed), and reports both per-read costs and
// their ratio (store-per-kept).
func storeVsKept(b *testing.B, ctx context.Context, h *Hub, other string, readStore, readKept func()) {
	for _, tc := range []struct {
		name   string
		commit bool
	}{{"idle", false}, {"commit-between", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var storeT, keptT time.Duration
			n := 0
			for b.Loop() {
				if tc.commit {
					if _, err := h.UpdateInstances(ctx, []UpdateInstance{{ID: other, Value: json.RawMessage(`{"n":1}`)}}); err != nil {
						b.Fatal(err)
					}
				}
				for i := range 2 {
					t0 := time.Now()
					if (n+i)%2 == 0 {
						readStore()
						storeT += time.Since(t0)
					} else {
						readKept()
						keptT += time.Since(t0)
					}
				}
				n++
			}
			b.ReportMetric(float64(storeT.Nanoseconds())/float64(n), "store-ns/op")
			b.ReportMetric(float64(keptT.Nanoseconds())/float64(n), "kept-ns/op")
			b.ReportMetric(float64(storeT)/float64(keptT), "store-per-kept")
		})
	}
}

// benchHub is a hub on a new SQLite file, with an actor in its context.
func benchHub(b *testing.B) (context.Context, *Hub) {
	b.Helper()
	ctx := cairn.WithActor(context.Background(), "bench")
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := New(ctx, Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return ctx, h
}
