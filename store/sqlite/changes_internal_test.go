package sqlite

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// A create stamps its instance with the Seq its ADDED change is logged
// under, without reading the instance back: also after a refused create
// in the same transaction, after the whole log was pruned, and when the
// newest change was logged by another statement kind.
func TestCreateStampsItsChange(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	taken := flag(1)
	taken.ID = "00000000-0000-4000-9000-000000000001" // flag(1)'s name again
	err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, flag(1)); err != nil {
			return err
		}
		if err := tx.CreateInstance(ctx, taken); !cairn.HasCode(err, cairn.CodeAlreadyExists) {
			t.Errorf("create of a taken name: %v, want AlreadyExists", err)
		}
		if err := tx.CreateInstance(ctx, flag(2)); err != nil {
			return err
		}
		// The transaction's position is its own last change's: the
		// create's, stamped on the instance.
		pos, err := tx.LastSeq(ctx)
		if err != nil {
			return err
		}
		got, err := tx.GetInstancesBrief(ctx, []string{flag(2).ID})
		if err != nil || len(got) != 1 || got[0].Seq != pos {
			t.Errorf("in the transaction: LastSeq %d, instance %v, %v", pos, got, err)
		}
		return tx.SetMetadata(ctx, flag(1).ID, map[string]string{"x": "y"}, nil) // no second change
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMetadata(ctx, flag(2).ID, map[string]string{"x": "z"}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, create(3, false)); err != nil {
		t.Fatal(err)
	}
	last := checkStamps(t, s, 0, []store.ChangeKind{store.Added, store.Added, store.Modified, store.Added})

	// Pruned through the last change: the next create's Seq is still new.
	if err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PruneChanges(ctx, last) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, create(4, false)); err != nil {
		t.Fatal(err)
	}
	checkStamps(t, s, last, []store.ChangeKind{store.Added})
}

// checkStamps reads the log after pos, checks its kinds and that each
// instance ADDED there carries the Seq of its last change, and returns the last Seq, which
// must be LastSeq.
func checkStamps(t *testing.T, s *Store, pos int64, kinds []store.ChangeKind) int64 {
	t.Helper()
	ctx := context.Background()
	changes, err := s.Changes(ctx, pos, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != len(kinds) {
		t.Fatalf("changes after %d: %v, want kinds %v", pos, changes, kinds)
	}
	lastOf := map[string]int64{} // each instance's last change
	for i, c := range changes {
		if c.Kind != kinds[i] || c.Seq <= pos || (i > 0 && c.Seq <= changes[i-1].Seq) {
			t.Fatalf("change %d: %+v, want %s with a Seq above %d", i, c, kinds[i], pos)
		}
		lastOf[c.InstanceID] = c.Seq
	}
	for _, c := range changes {
		if c.Kind != store.Added {
			continue
		}
		in, err := s.GetInstances(ctx, []string{c.InstanceID})
		if err != nil || len(in) != 1 {
			t.Fatalf("instance %s: %v, %v", c.InstanceID, in, err)
		}
		if in[0].Seq != lastOf[c.InstanceID] {
			t.Errorf("instance %s: Seq %d, want its last change's %d", c.InstanceID, in[0].Seq, lastOf[c.InstanceID])
		}
		if c.TypeRef != in[0].TypeRef || c.Namespace != in[0].Namespace || c.Name != in[0].Name {
			t.Errorf("ADDED change %+v does not name instance %s/%s/%s", c, in[0].TypeRef, in[0].Namespace, in[0].Name)
		}
	}
	last := changes[len(changes)-1].Seq
	if got, err := s.LastSeq(ctx); err != nil || got != last {
		t.Errorf("LastSeq = %d, %v; want %d", got, err, last)
	}
	return last
}
