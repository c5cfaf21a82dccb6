package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// SyncFull syncs the write-ahead log at every commit, so an acknowledged
// write survives a power loss; SyncNormal (the default) leaves the sync to
// checkpoints. The count is of the WAL's syncs through cairn's VFS, the
// calls that reach fsync.
func TestSyncSetsWhenCommitsReachTheDisk(t *testing.T) {
	for _, tc := range []struct {
		opts      []Option
		pragma    int // PRAGMA synchronous: 1 NORMAL, 2 FULL
		perCommit bool
	}{
		{nil, 1, false},
		{[]Option{WithSync(SyncNormal)}, 1, false},
		{[]Option{WithSync(SyncFull)}, 2, true},
	} {
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "cairn.db"), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var got int
		if err := s.w.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.pragma {
			t.Errorf("%v: PRAGMA synchronous = %d, want %d", tc.opts, got, tc.pragma)
		}
		before := walSyncs.Load()
		const n = 5
		for i := range n {
			if err := s.Update(t.Context(), create(i+1, false)); err != nil {
				t.Fatal(err)
			}
		}
		synced := walSyncs.Load() - before
		if tc.perCommit && synced < n {
			t.Errorf("SyncFull: %d WAL syncs for %d commits, want one each", synced, n)
		}
		if !tc.perCommit && synced != 0 {
			t.Errorf("SyncNormal: %d WAL syncs for %d commits, want none before a checkpoint", synced, n)
		}
	}
}

func TestOpenRefusesAnUnknownSync(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "cairn.db"), WithSync("off; PRAGMA x"))
	if err == nil || !strings.Contains(err.Error(), `want "normal" or "full"`) {
		t.Fatalf("Open with an unknown sync: %v, want it refused naming the choices", err)
	}
}

// BenchmarkSyncedCreates runs the hub's create transaction from 16 writers
// with the WAL synced at checkpoints only and at every commit (what cairn
// serve does by default). syncs/create is one over the group size. Under
// scripts/bench's create load over HTTP a group's sync, not its
// statements, was most of the writer's time on the shared 2-core VM
// (2026-11-25: 0.3-1.5 ms per group of about 7 creates, against about
// 45 µs of statements per create).
func BenchmarkSyncedCreates(b *testing.B) {
	for _, sync := range []Sync{SyncNormal, SyncFull} {
		b.Run("sync="+string(sync), func(b *testing.B) {
			newID := func() string { return uuid.Must(uuid.NewV7()).String() }
			s := hubStore(b, newID, WithSync(sync))
			var next atomic.Int64
			syncs := walSyncs.Load()
			b.SetParallelism(8) // 16 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Update(context.Background(), hubCreate(newID(), int(next.Add(1)))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(walSyncs.Load()-syncs)/float64(b.N), "syncs/create")
		})
	}
}
