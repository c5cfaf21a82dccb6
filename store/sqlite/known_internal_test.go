package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// What a write transaction keeps of itself (txKnown) follows its own
// writes: a Type deleted in it no longer matches, a write of its group
// undone takes back what was learnt from it, and LastSeq through it is its
// newest change as SQLite has it.
func TestWriteTransactionKnowsItself(t *testing.T) {
	s := groupStore(t)
	ctx := t.Context()
	ref := flag(0).TypeRef
	matches := func(tx store.Tx) bool {
		t.Helper()
		ok, err := tx.(store.TypeMatcher).TypeMatches(ctx, ref, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// lastSeq is LastSeq through tx, checked against the query's answer.
	lastSeq := func(tx store.Tx) int64 {
		t.Helper()
		got, err := tx.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		if err := asTx(tx).queryRow(ctx, qLastSeq).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("LastSeq through the transaction = %d, SQLite has %d", got, want)
		}
		return got
	}

	err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision}); err != nil {
			return err
		}
		if !matches(tx) || !matches(tx) {
			t.Error("a Type created in the transaction does not match")
		}
		if n := len(asTx(tx).known.matched); n != 1 {
			t.Errorf("%d yes answers kept, want 1", n)
		}
		if err := tx.DeleteType(ctx, ref); err != nil {
			return err
		}
		if matches(tx) {
			t.Error("a Type deleted in the transaction still matches")
		}
		if err := tx.CreateType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision}); err != nil {
			return err
		}
		if err := create(1, false)(ctx, tx); err != nil {
			return err
		}
		lastSeq(tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A group: the second write learns a Type match and logs a change,
	// then fails; the third must see neither.
	refused := errors.New("refused")
	var before, after int64
	group := []*writeOp{
		{ctx: ctx, done: make(chan struct{}), fn: func(ctx context.Context, tx store.Tx) error {
			if err := create(2, false)(ctx, tx); err != nil {
				return err
			}
			before = lastSeq(tx)
			return nil
		}},
		{ctx: ctx, done: make(chan struct{}), fn: func(ctx context.Context, tx store.Tx) error {
			if err := tx.DeleteType(ctx, ref); !cairn.HasCode(err, cairn.CodeUsedBy) {
				t.Errorf("DeleteType of a used Type = %v", err)
			}
			other := cairn.TypeRef{Path: "cap.type.other", Revision: "0.1.0"}
			if err := tx.CreateType(ctx, cairn.Type{Path: other.Path, Revision: other.Revision}); err != nil {
				return err
			}
			if ok, err := tx.(store.TypeMatcher).TypeMatches(ctx, other, nil, false); err != nil || !ok {
				t.Errorf("TypeMatches of a Type created in the write = %v, %v", ok, err)
			}
			ref = other
			if err := create(3, false)(ctx, tx); err != nil {
				return err
			}
			if lastSeq(tx) <= before {
				t.Error("LastSeq did not move with the write's change")
			}
			return refused
		}},
		{ctx: ctx, done: make(chan struct{}), fn: func(ctx context.Context, tx store.Tx) error {
			if matches(tx) { // ref is the Type the undone write created
				t.Error("a Type created by an undone write matches")
			}
			after = lastSeq(tx)
			return nil
		}},
	}
	s.runGroup(group)
	if !errors.Is(group[1].err, refused) || group[0].err != nil || group[2].err != nil {
		t.Fatalf("group errors = %v, %v, %v", group[0].err, group[1].err, group[2].err)
	}
	if after != before {
		t.Fatalf("LastSeq after an undone write = %d, want %d as before it", after, before)
	}
}

func asTx(w store.Tx) *tx { return w.(*tx) }

// A group runs its writes without savepoints; when one fails, the others
// run again in another transaction, each in a savepoint: the failed write
// runs once and its result stands, the others twice and commit, also the
// one whose caller went away after it had begun, and each write's
// AfterCommit runs once.
func TestGroupRunsTheOthersAgainAfterAFailure(t *testing.T) {
	for _, failing := range []int{-1, 0, 2, 4} {
		t.Run(fmt.Sprint("failing=", failing), func(t *testing.T) {
			s := groupStore(t)
			gone, cancel := context.WithCancel(t.Context())
			defer cancel()
			runs, after := make([]int, 5), make([]int, 5)
			group := make([]*writeOp, 5)
			for i := range group {
				ctx := t.Context()
				if i == 1 {
					ctx = gone
				}
				group[i] = &writeOp{ctx: ctx, done: make(chan struct{}), fn: func(ctx context.Context, tx store.Tx) error {
					runs[i]++
					if i == 1 {
						cancel() // its caller goes; its write has begun
					}
					if err := create(i+1, i == failing)(ctx, tx); err != nil {
						return err
					}
					tx.(store.AfterCommitter).AfterCommit(func() { after[i]++ })
					return nil
				}}
			}
			if committed := s.runGroup(group); !committed {
				t.Fatal("the group did not commit")
			}
			for i, op := range group {
				wantRuns := 1
				if failing >= 0 && i != failing {
					wantRuns = 2
				}
				if failing >= 0 && i > failing {
					wantRuns = 1 // not begun when the failure came
				}
				if i == failing {
					if op.err == nil || runs[i] != 1 || after[i] != 0 {
						t.Errorf("the failed write %d: %v, ran %d times, AfterCommit %d times", i, op.err, runs[i], after[i])
					}
					continue
				}
				if op.err != nil || runs[i] != wantRuns || after[i] != 1 {
					t.Errorf("write %d: %v, ran %d times (want %d), AfterCommit %d times", i, op.err, runs[i], wantRuns, after[i])
				}
				if _, err := s.GetInstances(t.Context(), []string{flag(i + 1).ID}); err != nil {
					t.Error(err)
				}
			}
			changes, err := s.Changes(t.Context(), 0, 0)
			if want := 5; failing >= 0 && len(changes) != want-1 || failing < 0 && len(changes) != want || err != nil {
				t.Errorf("%d changes logged, %v", len(changes), err)
			}
		})
	}
}

// The backend AddUses found in a transaction is not looked up again for
// the next create of the transaction with that backend, until an instance
// is deleted: a backend deleted in the transaction is missing again.
func TestAddUsesOfAKnownBackend(t *testing.T) {
	s := groupStore(t)
	backend := flag(1)
	backend.Backend.ID = backend.ID
	err := s.Update(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, backend); err != nil {
			return err
		}
		for _, n := range []int{2, 3} {
			in := flag(n)
			in.Backend.ID = backend.ID
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
			if err := tx.AddUses(ctx, in.ID, backend.ID); err != nil {
				return err
			}
			if !asTx(tx).known.isThere(backend.ID) {
				t.Errorf("after create %d: the backend is not known to be there", n)
			}
		}
		for _, n := range []int{2, 3, 1} {
			if err := tx.DeleteInstance(ctx, flag(n).ID); err != nil {
				return err
			}
		}
		in := flag(4)
		in.Backend.ID = backend.ID
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, in.ID, backend.ID); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("AddUses to a backend deleted in the transaction = %v, want NotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
