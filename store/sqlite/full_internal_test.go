package sqlite

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// A full disk refuses writes as Unavailable (503: PostgreSQL's disk_full
// is too), naming the database and what to do, not as an internal error;
// the refused write leaves nothing, and writes succeed again once there
// is room, without reopening. SQLite's max_page_count makes the same
// SQLITE_FULL a full file system does.
func TestAFullDiskRefusesWritesUntilThereIsRoom(t *testing.T) {
	s := groupStore(t)
	ctx := t.Context()
	if err := s.Update(ctx, create(1, false)); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	big := func(n int) func(ctx context.Context, tx store.Tx) error {
		return func(ctx context.Context, tx store.Tx) error {
			if err := tx.CreateInstance(ctx, flag(n)); err != nil {
				return err
			}
			return tx.PutValue(ctx, flag(n).ID, 1, []byte(`{"description":"`+strings.Repeat("x", 1<<20)+`"}`))
		}
	}
	err := s.Update(ctx, big(2))
	if code := cairn.ErrorCode(err); code != cairn.CodeUnavailable {
		t.Fatalf("write on a full disk: %v (code %s); want Unavailable", err, code)
	}
	for _, want := range []string{s.path, "full", "free space"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got, err := s.GetInstancesBrief(ctx, []string{flag(2).ID}); err != nil || len(got) != 0 {
		t.Fatalf("the refused write left %d instances (%v)", len(got), err)
	}

	// Writes that share a transaction with the one refused (group
	// commit) are each written or refused Unavailable, never lost or
	// refused as internal errors.
	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.Itoa(pages+4)); err != nil {
		t.Fatal(err)
	}
	release, first := holdWriter(t, s)
	writes := map[int]func(ctx context.Context, tx store.Tx) error{3: create(3, false), 2: big(2), 4: create(4, false)}
	errs := map[int]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, n := range []int{3, 2, 4} {
		wg.Go(func() {
			err := s.Update(ctx, writes[n])
			mu.Lock()
			errs[n] = err
			mu.Unlock()
		})
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("the write holding the writer: %v", err)
	}
	for _, n := range []int{3, 2, 4} {
		got, err := s.GetInstancesBrief(ctx, []string{flag(n).ID})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case errs[n] == nil && len(got) == 1:
		case cairn.ErrorCode(errs[n]) == cairn.CodeUnavailable && len(got) == 0:
		default:
			t.Errorf("write %d of a group: %v (code %s), %d instances; want written, or refused Unavailable and absent", n, errs[n], cairn.ErrorCode(errs[n]), len(got))
		}
	}
	if errs[2] == nil {
		t.Error("the write too big for the disk was acknowledged")
	}

	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, big(2)); err != nil {
		t.Fatalf("write once there is room: %v", err)
	}
}
