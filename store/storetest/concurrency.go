package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

const workers = 8

// testConcurrentVersions runs read-latest-then-append from many goroutines.
// Whatever the store's isolation, retrying on CodeConflict must yield
// versions 1..N+1 without gaps, each writer's version exactly once.
func testConcurrentVersions(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := instance(1, "cap.type.a", "0.1.0", "default", "a")
	create(t, s, in)

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			by := fmt.Sprintf("worker-%d", w)
			for attempt := 0; ; attempt++ {
				err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
					got, err := tx.GetInstances(ctx, []string{in.ID})
					if err != nil {
						return err
					}
					if len(got) != 1 {
						return fmt.Errorf("instance %s not found", in.ID)
					}
					return tx.AddResourceVersion(ctx, in.ID, cairn.ResourceVersion{
						ResourceVersion: got[0].Latest.ResourceVersion + 1,
						CreatedBy:       by,
						CreatedAt:       at(100 + w),
					})
				})
				if cairn.ErrorCode(err) == cairn.CodeConflict && attempt < 100 {
					continue
				}
				errs <- err
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	}

	rvs, err := s.ResourceVersions(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	var creators []string
	for i, rv := range rvs {
		if rv.ResourceVersion != i+1 {
			t.Fatalf("version %d at position %d: versions have a gap", rv.ResourceVersion, i)
		}
		if i > 0 {
			creators = append(creators, rv.CreatedBy)
		}
	}
	if len(rvs) != workers+1 {
		t.Fatalf("%d versions, want %d", len(rvs), workers+1)
	}
	slices.Sort(creators)
	if got := slices.Compact(slices.Clone(creators)); len(got) != workers {
		t.Fatalf("creators %q: an update was lost or doubled", creators)
	}
	if got := get(t, s, in.ID).Latest.ResourceVersion; got != workers+1 {
		t.Fatalf("latest = %d, want %d", got, workers+1)
	}
}

// testConcurrentLock races owners that each lock an instance only if it is
// unlocked: exactly one may win.
func testConcurrentLock(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := instance(1, "cap.type.a", "0.1.0", "default", "a")
	create(t, s, in)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
	)
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("owner-%d", w)
			for attempt := 0; attempt < 100; attempt++ {
				won := false
				err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
					won = false // fn may be retried
					got, err := tx.GetInstances(ctx, []string{in.ID})
					if err != nil {
						return err
					}
					if len(got) != 1 || got[0].LockedBy != "" {
						return nil
					}
					if err := tx.SetLockedBy(ctx, []string{in.ID}, owner); err != nil {
						return err
					}
					won = true
					return nil
				})
				if cairn.ErrorCode(err) == cairn.CodeConflict {
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", owner, err)
					return
				}
				if won {
					mu.Lock()
					winners = append(winners, owner)
					mu.Unlock()
				}
				return
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners = %q, want exactly one", winners)
	}
	if got := get(t, s, in.ID).LockedBy; got != winners[0] {
		t.Fatalf("locked by %q, want the winner %q", got, winners[0])
	}
}
