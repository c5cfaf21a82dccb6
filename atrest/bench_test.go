package atrest_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/atrest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkAtRest measures the cost of encryption at rest per write and
// read of a credentials value through the hub on SQLite, against the same
// work in plaintext (identity) in the same run. Compare the ns/op of the
// sub-benchmarks: the ratio is the overhead.
func BenchmarkAtRest(b *testing.B) {
	value := json.RawMessage(`{"username":"app","password":"0123456789abcdef0123456789abcdef"}`)
	for _, tc := range []struct{ name, providers string }{
		{"identity", "      - identity: {}\n"},
		{"aesgcm", gcm1},
		{"secretbox", box},
	} {
		c := config(b, tc.providers)
		open := func(b *testing.B) *hub.Hub {
			st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "cairn.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			h, err := hub.New(b.Context(), hub.Config{Store: atrest.Wrap(st, c)})
			if err != nil {
				b.Fatal(err)
			}
			return h
		}
		ref := cairn.TypeRef{Path: "cap.type.database.postgresql.credentials", Revision: "0.1.0"}
		b.Run("write/"+tc.name, func(b *testing.B) {
			h := open(b)
			i := 0
			for b.Loop() {
				i++
				if _, err := h.CreateInstances(b.Context(), hub.CreateRequest{Instances: []hub.NewInstance{{Name: fmt.Sprint("c", i), TypeRef: ref, Value: value}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("read/"+tc.name, func(b *testing.B) {
			h := open(b)
			created, err := h.CreateInstances(b.Context(), hub.CreateRequest{Instances: []hub.NewInstance{{Name: "c", TypeRef: ref, Value: value}}})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := h.GetInstance(b.Context(), created[0].ID, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSeal is the cipher alone, against copying the value.
func BenchmarkSeal(b *testing.B) {
	value := json.RawMessage(`{"username":"app","password":"0123456789abcdef0123456789abcdef"}`)
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			_ = append(json.RawMessage(nil), value...)
		}
	})
	for name, p := range map[string]string{"aesgcm": gcm1, "secretbox": box} {
		c := config(b, p)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s, err := c.Seal("cap.type.x.credentials", "id", 1, value)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Open("id", 1, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
