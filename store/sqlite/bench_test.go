package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// benchInstance is a realistic instance: two labels, an annotation, an
// attribute and a backend context.
func benchInstance(n int) cairn.Instance {
	now := time.Now()
	return cairn.Instance{
		ID:          fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		TypeRef:     cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"},
		Namespace:   "default",
		Name:        fmt.Sprintf("db-%d", n),
		Labels:      map[string]string{"env": []string{"prod", "dev", "staging"}[n%3], "app": fmt.Sprintf("app-%d", n%10)},
		Annotations: map[string]string{"owner": "team-a"},
		Backend:     cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		CreatedAt:   now,
		Latest: cairn.ResourceVersion{
			ResourceVersion: 1,
			CreatedBy:       "bench",
			CreatedAt:       now,
			Attributes:      []cairn.AttributeRef{{Path: "cap.attribute.managed", Revision: "0.1.0"}},
			Context:         json.RawMessage(`{"bucket":"state","key":"db"}`),
		},
	}
}

func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	return open(b, filepath.Join(b.TempDir(), "bench.db"))
}

func benchUpdate(b *testing.B, s *sqlite.Store, fn func(ctx context.Context, tx store.Tx) error) {
	b.Helper()
	if err := s.Update(b.Context(), fn); err != nil {
		b.Fatal(err)
	}
}

// seed creates n instances in one transaction; each uses the previous one.
func seed(b *testing.B, s *sqlite.Store, n int) []string {
	b.Helper()
	ids := make([]string, n)
	benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error {
		for i := range n {
			in := benchInstance(i)
			ids[i] = in.ID
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
			if i > 0 {
				if err := tx.AddUses(ctx, ids[i], ids[i-1]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return ids
}

func BenchmarkCreateInstance(b *testing.B) {
	s := benchStore(b)
	n := 0
	for b.Loop() {
		n++
		benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error { return tx.CreateInstance(ctx, benchInstance(n)) })
	}
}

func BenchmarkCreate1000InOneTx(b *testing.B) {
	s := benchStore(b)
	n := 0
	for b.Loop() {
		benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error {
			for range 1000 {
				n++
				if err := tx.CreateInstance(ctx, benchInstance(n)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/instance")
}

func BenchmarkGetInstances(b *testing.B) {
	s := benchStore(b)
	ids := seed(b, s, 1000)
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("ids=%d", size), func(b *testing.B) {
			i := 0
			for b.Loop() {
				start := (i * 7919) % (len(ids) - size + 1)
				i++
				got, err := s.GetInstances(b.Context(), ids[start:start+size])
				if err != nil || len(got) != size {
					b.Fatalf("GetInstances = %d, %v", len(got), err)
				}
			}
		})
	}
}

func BenchmarkListInstances1000(b *testing.B) {
	s := benchStore(b)
	seed(b, s, 1000)
	filters := map[string]store.InstanceFilter{
		"all": {},
		"filtered": {
			TypePath:   "cap.type.database.*",
			Labels:     []labels.Requirement{{Key: "env", Operator: labels.NotEquals, Values: []string{"nope"}}},
			Attributes: []store.AttributeFilter{{Path: "cap.attribute.managed"}},
		},
	}
	for name, f := range filters {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				got, err := s.ListInstances(b.Context(), f)
				if err != nil || len(got) != 1000 {
					b.Fatalf("ListInstances = %d, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkListPage reads a page of 100 of 1,000 instances of a Type from
// the middle of the list, after the previous page's last instance, in the
// store's own order and in name order (a REST list's): both a range of an
// index.
func BenchmarkListPage(b *testing.B) {
	s := benchStore(b)
	seed(b, s, 1000)
	for name, o := range map[string]store.InstanceOrder{"by type": store.ByType, "by name": store.ByName} {
		b.Run(name, func(b *testing.B) {
			f := store.InstanceFilter{TypePath: "cap.type.database.postgresql.config", Order: o, Limit: 500}
			first, err := s.ListInstances(b.Context(), f)
			if err != nil || len(first) != 500 {
				b.Fatalf("ListInstances = %d, %v", len(first), err)
			}
			f.Limit, f.After = 100, &first[len(first)-1]
			for b.Loop() {
				got, err := s.ListInstances(b.Context(), f)
				if err != nil || len(got) != 100 {
					b.Fatalf("ListInstances = %d, %v", len(got), err)
				}
			}
		})
	}
}

func BenchmarkAddResourceVersion(b *testing.B) {
	s := benchStore(b)
	in := benchInstance(1)
	benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error { return tx.CreateInstance(ctx, in) })
	rv := in.Latest
	for b.Loop() {
		rv.ResourceVersion++
		rv.CreatedAt = time.Now()
		benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error { return tx.AddResourceVersion(ctx, in.ID, rv) })
	}
}

func BenchmarkSetLockedBy(b *testing.B) {
	s := benchStore(b)
	ids := seed(b, s, 10)
	owners := []string{"alice", ""}
	i := 0
	for b.Loop() {
		owner := owners[i%2]
		i++
		benchUpdate(b, s, func(ctx context.Context, tx store.Tx) error { return tx.SetLockedBy(ctx, ids, owner) })
	}
}

func BenchmarkGetInstancesBriefOne(b *testing.B) {
	s := benchStore(b)
	ids := seed(b, s, 1000)
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.GetInstancesBrief(b.Context(), ids[i%1000:i%1000+1]); err != nil {
			b.Fatal(err)
		}
	}
}
