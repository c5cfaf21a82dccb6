package hub

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkResolveBackend resolves a backend instance with a context
// schema, as every operation on an instance does for its backend: decoding
// its value and compiling the schema lookup each time (the kept decodings
// forgotten before every call), against what is kept by resource version.
func BenchmarkResolveBackend(b *testing.B) {
	ctx := cairn.WithActor(context.Background(), "bench")
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h, err := New(ctx, Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	out, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{
		Alias:      "ext",
		TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
		Value:      json.RawMessage(`{"url":"test://ext","acceptValue":true,"contextSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	id := out[0].ID
	for _, tc := range []struct {
		name   string
		forget bool
	}{{"decode", true}, {"kept", false}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if tc.forget {
					h.backends.mu.Lock()
					h.backends.m = nil
					h.backends.mu.Unlock()
				}
				rb, err := h.resolveBackend(ctx, h.st, id, false)
				if err != nil || rb.URL != "test://ext" || rb.contextSchema == nil {
					b.Fatal(rb, err)
				}
			}
		})
	}
}
