package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// LastSeq answers from the WAL-index header while nothing commits, and
// queries again after any commit, also one through another Store (another
// process's connections) on the same file.
func TestLastSeqFollowsTheWALHeader(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "cairn.db")
	openStore := func() *Store {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	writer, reader := openStore(), openStore()
	queries := 0
	query := func(ctx context.Context) (int64, error) {
		queries++
		return reader.pool().LastSeq(ctx)
	}
	last := func() int64 {
		t.Helper()
		seq, err := reader.position.lastSeq(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := writer.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateType(ctx, cairn.Type{Path: "cap.type.a", Revision: "0.1.0", CreatedAt: at})
	}); err != nil {
		t.Fatal(err)
	}

	start := last()
	if n := queries; n != 1 {
		t.Fatalf("%d queries for the first read", n)
	}
	for range 3 {
		if seq := last(); seq != start {
			t.Fatalf("LastSeq = %d with no write, want %d", seq, start)
		}
	}
	if queries != 1 {
		t.Fatalf("%d queries for four reads with no commit between them: the header was not used", queries)
	}
	for i := range 20 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		if err := writer.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			return tx.CreateInstance(ctx, cairn.Instance{ID: id, TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
				Namespace: "default", Name: id, CreatedAt: at, Latest: cairn.ResourceVersion{ResourceVersion: 1, CreatedAt: at}})
		}); err != nil {
			t.Fatal(err)
		}
		want, err := writer.pool().LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := last(); got != want || got <= start {
			t.Fatalf("write %d: LastSeq through the other store = %d, want %d", i, got, want)
		}
		if got := last(); got != want {
			t.Fatalf("write %d, read again: %d, want %d", i, got, want)
		}
	}
	if queries != 21 {
		t.Fatalf("%d queries for 20 writes each read twice: want one per write (and the first)", queries)
	}
}

// BenchmarkLastSeq: the position from the WAL-index header against the
// query it saves, in the same run.
func BenchmarkLastSeq(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "cairn.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("query", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.pool().LastSeq(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("header", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.LastSeq(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A commit of the Store's writer leaves its position for LastSeq: the
// reads after it need no query, alone or in a group, also when another
// Store on the same file committed just before; a commit of the other
// Store is read by a query.
func TestLastSeqFromOwnCommits(t *testing.T) {
	ctx := t.Context()
	s, other := twoStores(t)
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateType(ctx, cairn.Type{Path: flag(0).TypeRef.Path, Revision: flag(0).TypeRef.Revision})
	}); err != nil {
		t.Fatal(err)
	}
	queries := 0
	query := func(ctx context.Context) (int64, error) {
		queries++
		return s.pool().LastSeq(ctx)
	}
	check := func(step string, wantQueries int) {
		t.Helper()
		queries = 0
		want, err := other.pool().LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := s.position.lastSeq(ctx, query)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: LastSeq = %d, the store's is %d", step, got, want)
			}
		}
		if queries != wantQueries {
			t.Fatalf("%s: %d queries for two reads, want %d", step, queries, wantQueries)
		}
	}
	n := 0
	write := func(st *Store) error {
		n++
		return st.Update(ctx, create(n, false))
	}

	for i := range 3 {
		if err := write(s); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("own write %d", i), 0)
	}
	if err := write(other); err != nil {
		t.Fatal(err)
	}
	check("the other store's write", 1)
	if err := write(other); err != nil {
		t.Fatal(err)
	}
	if err := write(s); err != nil {
		t.Fatal(err)
	}
	check("own write after the other's", 0)

	// A group: three writes queued behind a held writer, one refused.
	release, first := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range 3 {
		n++
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			s.Update(context.Background(), create(n, i == 1))
		}(n)
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	check("group", 0)
}

// BenchmarkPositionAfterCommit: a group commit of 8 creates, then the
// position read once per create (as the hub's creates read it before
// their backend resolution), the position published by the commit against
// queried by the reads, in the same run; ns/create.
func BenchmarkPositionAfterCommit(b *testing.B) {
	const size = 8
	for _, bc := range []struct {
		name        string
		unpublished bool
	}{{"queried", true}, {"published", false}} {
		b.Run(bc.name, func(b *testing.B) {
			s := groupStore(b)
			s.position.unpublished = bc.unpublished
			if err := s.Update(b.Context(), func(ctx context.Context, tx store.Tx) error {
				return tx.CreateType(ctx, cairn.Type{Path: flag(0).TypeRef.Path, Revision: flag(0).TypeRef.Revision})
			}); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				group := make([]*writeOp, size)
				for i := range group {
					n++
					group[i] = &writeOp{ctx: b.Context(), fn: create(n, false), done: make(chan struct{})}
				}
				commitGroup(b, s, group)
				for range group {
					if _, err := s.LastSeq(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/create")
		})
	}
}

// twoStores opens two Stores on one new SQLite file, as two processes
// would: each with its own writer, readers and position.
func twoStores(t *testing.T) (*Store, *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cairn.db")
	var stores [2]*Store
	for i := range stores {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	return stores[0], stores[1]
}
