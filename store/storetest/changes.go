package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// changeLog reads every change after pos.
func changeLog(t *testing.T, s store.Store, after int64) []store.Change {
	t.Helper()
	got, err := s.Changes(t.Context(), after, 0)
	if err != nil {
		t.Fatalf("Changes(%d): %v", after, err)
	}
	return got
}

type changeWant struct {
	kind store.ChangeKind
	id   string
}

func wantChanges(t *testing.T, got []store.Change, want ...changeWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	for i, c := range got {
		if c.Kind != want[i].kind || c.InstanceID != want[i].id {
			t.Fatalf("change %d = %s %s, want %s %s", i, c.Kind, c.InstanceID, want[i].kind, want[i].id)
		}
		if i > 0 && c.Seq <= got[i-1].Seq {
			t.Fatalf("change seqs not increasing: %d after %d", c.Seq, got[i-1].Seq)
		}
	}
}

func testChanges(t *testing.T, s store.Store) {
	ctx := t.Context()
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := instance(1, "cap.type.a", "0.1.0", "team", "a")
	b := instance(2, "cap.type.b", "0.1.0", "default", "b")
	create(t, s, a, b)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.AddResourceVersion(ctx, a.ID, cairn.ResourceVersion{ResourceVersion: 2, CreatedAt: at(9)})
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMetadata(ctx, b.ID, map[string]string{"x": "y"}, nil)
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetLockedBy(ctx, []string{a.ID, b.ID}, "owner")
	})
	// A rolled-back transaction leaves no change behind.
	boom := errors.New("boom")
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.SetLockedBy(ctx, []string{a.ID}, ""); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, b.ID) })

	all := changeLog(t, s, start)
	wantChanges(t, all,
		changeWant{store.Added, a.ID}, changeWant{store.Added, b.ID},
		changeWant{store.Modified, a.ID}, changeWant{store.Modified, b.ID},
		changeWant{store.Modified, a.ID}, changeWant{store.Modified, b.ID},
		changeWant{store.Deleted, b.ID})
	del := all[len(all)-1]
	if del.TypeRef != b.TypeRef || del.Namespace != "default" || del.Name != "b" {
		t.Errorf("DELETED change identity = %v %s/%s, want the deleted instance's", del.TypeRef, del.Namespace, del.Name)
	}
	if del.At.IsZero() {
		t.Error("change time is zero")
	}
	last, err := s.LastSeq(ctx)
	if err != nil || last != del.Seq {
		t.Errorf("LastSeq = %d, %v; want %d", last, err, del.Seq)
	}
	// An instance carries the Seq of its own last change.
	if got := get(t, s, a.ID).Seq; got != all[4].Seq {
		t.Errorf("instance Seq = %d, want %d", got, all[4].Seq)
	}

	// Paging through the log with a limit.
	page, err := s.Changes(ctx, start, 3)
	if err != nil || len(page) != 3 || page[0].Seq != all[0].Seq {
		t.Fatalf("Changes(limit 3) = %v, %v", page, err)
	}
	rest := changeLog(t, s, page[2].Seq)
	if len(rest) != len(all)-3 || rest[0].Seq != all[3].Seq {
		t.Fatalf("Changes after page = %v", rest)
	}

	// Pruning: positions before the pruned point are gone, later ones work,
	// and Seqs are never reused.
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PruneChanges(ctx, all[2].Seq) })
	_, err = s.Changes(ctx, all[1].Seq, 0)
	wantCode(t, err, cairn.CodeGone)
	wantChanges(t, changeLog(t, s, all[2].Seq),
		changeWant{store.Modified, b.ID}, changeWant{store.Modified, a.ID}, changeWant{store.Modified, b.ID}, changeWant{store.Deleted, b.ID})
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PruneChanges(ctx, last) })
	if got := changeLog(t, s, last); len(got) != 0 {
		t.Errorf("changes after pruning everything = %v", got)
	}
	create(t, s, instance(3, "cap.type.c", "0.1.0", "default", "c"))
	next := changeLog(t, s, last)
	if len(next) != 1 || next[0].Seq <= last {
		t.Errorf("change after prune = %v, want a Seq above %d", next, last)
	}
}

// testOneChangePerTx: a transaction that versions, relabels and locks one
// instance is one change of it (watchers see one event per write), and an
// instance created and changed in one transaction is one ADDED.
func testOneChangePerTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := instance(1, "cap.type.a", "0.1.0", "default", "a")
	b := instance(2, "cap.type.a", "0.1.0", "default", "b")
	create(t, s, a)
	start, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddResourceVersion(ctx, a.ID, cairn.ResourceVersion{ResourceVersion: 2, CreatedAt: at(9)}); err != nil {
			return err
		}
		if err := tx.SetMetadata(ctx, a.ID, map[string]string{"x": "y"}, map[string]string{"n": "m"}); err != nil {
			return err
		}
		if err := tx.SetLockedBy(ctx, []string{a.ID}, "owner"); err != nil {
			return err
		}
		if err := tx.CreateInstance(ctx, b); err != nil {
			return err
		}
		return tx.SetMetadata(ctx, b.ID, map[string]string{"x": "z"}, nil)
	})
	all := changeLog(t, s, start)
	wantChanges(t, all, changeWant{store.Modified, a.ID}, changeWant{store.Added, b.ID})
	if got := get(t, s, a.ID); got.Seq != all[0].Seq || got.Labels["x"] != "y" || got.LockedBy != "owner" || got.Latest.ResourceVersion != 2 {
		t.Errorf("instance after the transaction = %+v, want Seq %d and every change applied", got, all[0].Seq)
	}
	// A delete is always its own change, even after a change in the same
	// transaction.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.SetMetadata(ctx, b.ID, nil, nil); err != nil {
			return err
		}
		return tx.DeleteInstance(ctx, b.ID)
	})
	wantChanges(t, changeLog(t, s, all[1].Seq), changeWant{store.Modified, b.ID}, changeWant{store.Deleted, b.ID})
}

func testListPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ins []cairn.Instance
	n := 0
	for _, path := range []string{"cap.type.a", "cap.type.b"} {
		for _, rev := range []string{"0.9.0", "0.10.0"} {
			for k := 0; k < 3; k++ {
				n++
				in := instance(n, path, rev, "default", "i"+id(n)[24:])
				in.CreatedAt = at(k % 2) // equal createdAt: ties broken by id
				ins = append(ins, in)
			}
		}
	}
	create(t, s, ins...)
	full, err := s.ListInstances(ctx, store.InstanceFilter{TypePath: "cap.type.*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != len(ins) {
		t.Fatalf("full list = %d instances, want %d", len(full), len(ins))
	}
	for _, size := range []int{1, 2, 5, 12, 20} {
		var paged []string
		f := store.InstanceFilter{TypePath: "cap.type.*", Limit: size}
		for pages := 0; ; pages++ {
			if pages > len(ins) {
				t.Fatalf("limit %d: paging does not end", size)
			}
			page, err := s.ListInstances(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > size {
				t.Fatalf("limit %d: page of %d", size, len(page))
			}
			paged = append(paged, ids(page)...)
			if len(page) < size {
				break
			}
			last := page[len(page)-1]
			f.After = &last
		}
		if !slices.Equal(paged, ids(full)) {
			t.Errorf("limit %d: pages = %v, want %v", size, paged, ids(full))
		}
	}
}

// testLastSeqInTx: through a transaction, LastSeq includes the
// transaction's own changes: after a create (its value and its uses edge
// written too) it is the Seq of the create's change, which the instance
// carries after the commit (the hub answers a create with it instead of
// reading the instance back).
func testLastSeqInTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := instance(1, "cap.type.a", "0.1.0", "default", "a")
	create(t, s, a)
	for i, in := range []cairn.Instance{instance(2, "cap.type.a", "0.1.0", "default", "b"), instance(3, "cap.type.b", "0.1.0", "other", "c")} {
		before, err := s.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var inTx int64
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
			if err := tx.PutValue(ctx, in.ID, 1, json.RawMessage(`{"n":1}`)); err != nil {
				return err
			}
			if err := tx.AddUses(ctx, in.ID, a.ID); err != nil {
				return err
			}
			var err error
			inTx, err = tx.LastSeq(ctx)
			return err
		})
		cs := changeLog(t, s, before)
		wantChanges(t, cs, changeWant{store.Added, in.ID})
		if inTx != cs[0].Seq || get(t, s, in.ID).Seq != inTx {
			t.Errorf("create %d: LastSeq in the transaction %d, its change %d, the instance's Seq %d; want all equal", i, inTx, cs[0].Seq, get(t, s, in.ID).Seq)
		}
	}
}
