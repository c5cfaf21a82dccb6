package sqlite

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// AddResourceVersion moves the instance's latest version before it
// inserts the version row; when the insert fails, the instance is put back
// on its latest version, even for a caller that goes on after the error.
func TestAddResourceVersionFailingLeavesTheLatest(t *testing.T) {
	s := groupStore(t)
	in := flag(1)
	err := s.Update(t.Context(), func(ctx context.Context, stx store.Tx) error {
		tx := stx.(*tx)
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		// A row for version 2 already there (no instance points at it)
		// makes the insert fail.
		if _, err := tx.exec(ctx, `INSERT INTO resource_versions (instance_id, resource_version) VALUES (?, 2)`, in.ID); err != nil {
			return err
		}
		next := in.Latest
		next.ResourceVersion = 2
		if err := tx.AddResourceVersion(ctx, in.ID, next); err == nil {
			t.Error("AddResourceVersion over an existing version row succeeded")
		}
		return nil // commit what the transaction did besides
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetInstances(t.Context(), []string{in.ID})
	if err != nil || len(got) != 1 || got[0].Latest.ResourceVersion != 1 {
		t.Fatalf("after the failed AddResourceVersion: %+v, %v; want the instance at version 1", got, err)
	}
}
