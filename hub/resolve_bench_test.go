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

// storeVsKept runs readStore and readKept alternately in one loop
// (alternate), idle and with a commit to instance other between rounds (not
// timed), and reports both per-read costs and their ratio (store-per-kept).
func storeVsKept(b *testing.B, ctx context.Context, h *Hub, other string, readStore, readKept func()) {
	for _, tc := range []struct {
		name   string
		commit bool
	}{{"idle", false}, {"commit-between", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var between func()
			if tc.commit {
				between = func() {
					if _, err := h.UpdateInstances(ctx, []UpdateInstance{{ID: other, Value: json.RawMessage(`{"n":1}`)}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			alternate(b, between, "store", timed(readStore), "kept", timed(readKept))
		})
	}
}

// alternate runs a and c alternately in one loop, A B then B A (each goes
// first every other round, as the first read after a commit pays for
// SQLite's new snapshot), with between, when not nil, at the start of each
// round (not timed). a and c return the time that counts for them. It
// reports their means per round, <aName>-ns/op and <cName>-ns/op, and their
// ratio, <aName>-per-<cName>.
func alternate(b *testing.B, between func(), aName string, a func() time.Duration, cName string, c func() time.Duration) {
	var aT, cT time.Duration
	n := 0
	for b.Loop() {
		if between != nil {
			between()
		}
		for i := range 2 {
			if (n+i)%2 == 0 {
				aT += a()
			} else {
				cT += c()
			}
		}
		n++
	}
	b.ReportMetric(float64(aT.Nanoseconds())/float64(n), aName+"-ns/op")
	b.ReportMetric(float64(cT.Nanoseconds())/float64(n), cName+"-ns/op")
	b.ReportMetric(float64(aT)/float64(cT), aName+"-per-"+cName)
}

// timed is f timed whole, for alternate.
func timed(f func()) func() time.Duration {
	return func() time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
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

// benchFlagType is a benchHub with the Flag Type registered, as cup's
// example defines it.
func benchFlagType(b *testing.B) (context.Context, *Hub, cairn.TypeRef) {
	b.Helper()
	ctx, h := benchHub(b)
	ref := cairn.TypeRef{Path: "cap.type.flipt.flag", Revision: "0.1.0"}
	if _, _, err := h.ApplyType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(
		`{"type":"object","additionalProperties":false,"properties":{"enabled":{"type":"boolean"},"description":{"type":"string"}}}`)}); err != nil {
		b.Fatal(err)
	}
	return ctx, h, ref
}

// benchFlag is a benchFlagType with one Flag, "f" in namespace default.
func benchFlag(b *testing.B) (context.Context, *Hub, cairn.TypeRef) {
	b.Helper()
	ctx, h, ref := benchFlagType(b)
	if _, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{TypeRef: ref, Namespace: "default", Name: "f",
		Value: json.RawMessage(`{"enabled":true}`)}}}); err != nil {
		b.Fatal(err)
	}
	return ctx, h, ref
}
