package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
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
