package sqlite

import (
	"context"
	"errors"
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
