package storetest

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

func testSetMetadata(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	create(t, s, in)
	newLabels := map[string]string{"env": "dev", "team": "payments"}
	newAnn := map[string]string{"note": "moved"}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.SetMetadata(ctx, in.ID, newLabels, newAnn) })

	got := get(t, s, in.ID)
	if !maps.Equal(got.Labels, newLabels) || !maps.Equal(got.Annotations, newAnn) {
		t.Fatalf("labels, annotations = %v, %v; want %v, %v", got.Labels, got.Annotations, newLabels, newAnn)
	}
	// Label filters see the new labels only.
	for _, tt := range []struct {
		req  labels.Requirement
		want int
	}{
		{labels.Requirement{Key: "env", Operator: labels.Equals, Values: []string{"prod"}}, 0},
		{labels.Requirement{Key: "app.kubernetes.io/name", Operator: labels.Exists}, 0},
		{labels.Requirement{Key: "team", Operator: labels.Equals, Values: []string{"payments"}}, 1},
	} {
		list, err := s.ListInstances(ctx, store.InstanceFilter{Labels: []labels.Requirement{tt.req}})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != tt.want {
			t.Errorf("ListInstances(%s) = %d instances, want %d", tt.req, len(list), tt.want)
		}
	}
	// Everything else is unchanged.
	want := in
	want.Labels, want.Annotations, want.Uses, want.UsedBy = newLabels, newAnn, nil, nil
	wantInstance(t, got, want)

	// Nil maps clear both.
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.SetMetadata(ctx, in.ID, nil, nil) })
	got = get(t, s, in.ID)
	if len(got.Labels) != 0 || len(got.Annotations) != 0 {
		t.Fatalf("labels, annotations = %v, %v; want none", got.Labels, got.Annotations)
	}
}

func testSetLockedBy(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s,
		instance(1, "cap.type.a", "0.1.0", "default", "a"),
		instance(2, "cap.type.a", "0.1.0", "default", "b"),
		instance(3, "cap.type.a", "0.1.0", "default", "c"),
	)
	lockedBy := func() []string {
		got, err := s.GetInstances(ctx, []string{id(1), id(2), id(3)})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(got))
		for i, in := range got {
			out[i] = in.LockedBy
		}
		return out
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetLockedBy(ctx, []string{id(1), id(2)}, "alice")
	})
	if got := lockedBy(); !slices.Equal(got, []string{"alice", "alice", ""}) {
		t.Fatalf("locks = %q after locking 1, 2", got)
	}

	// All or nothing: a missing id changes nothing and is named.
	err := try(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetLockedBy(ctx, []string{id(3), id(8), id(1), id(9)}, "bob")
	})
	wantCode(t, err, cairn.CodeNotFound)
	wantIDs(t, err, id(8), id(9))
	if got := lockedBy(); !slices.Equal(got, []string{"alice", "alice", ""}) {
		t.Fatalf("locks = %q after a failed lock, want unchanged", got)
	}
	// Even when the caller goes on and commits.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.SetLockedBy(ctx, []string{id(3), id(9)}, "bob")
		wantCode(t, err, cairn.CodeNotFound)
		return nil
	})
	if got := lockedBy(); !slices.Equal(got, []string{"alice", "alice", ""}) {
		t.Fatalf("locks = %q after a failed lock in a committed transaction, want unchanged", got)
	}

	// Another owner takes over (the hub decides whether it may).
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetLockedBy(ctx, []string{id(2), id(3)}, "bob")
	})
	if got := lockedBy(); !slices.Equal(got, []string{"alice", "bob", "bob"}) {
		t.Fatalf("locks = %q after locking 2, 3 for bob", got)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.SetLockedBy(ctx, []string{id(1), id(2)}, "") })
	if got := lockedBy(); !slices.Equal(got, []string{"", "", "bob"}) {
		t.Fatalf("locks = %q after unlocking 1, 2", got)
	}
}

func testAddUses(t *testing.T, s store.Store) {
	create(t, s,
		instance(1, "cap.type.app", "0.1.0", "default", "app"),
		instance(2, "cap.type.db", "0.1.0", "default", "db"),
	)
	for range 2 { // the second time is a no-op
		update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddUses(ctx, id(1), id(2)) })
		if got := get(t, s, id(1)); !slices.Equal(got.Uses, []string{id(2)}) || len(got.UsedBy) != 0 {
			t.Fatalf("app: uses %q, used by %q; want uses [db]", got.Uses, got.UsedBy)
		}
		if got := get(t, s, id(2)); !slices.Equal(got.UsedBy, []string{id(1)}) || len(got.Uses) != 0 {
			t.Fatalf("db: uses %q, used by %q; want used by [app]", got.Uses, got.UsedBy)
		}
	}
	for _, tt := range []struct {
		name     string
		from, to string
	}{
		{"missing from", id(9), id(2)},
		{"missing to", id(1), id(9)},
		{"both missing", id(8), id(9)},
	} {
		err := try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.AddUses(ctx, tt.from, tt.to) })
		wantCode(t, err, cairn.CodeNotFound)
	}
	if got := get(t, s, id(1)); !slices.Equal(got.Uses, []string{id(2)}) {
		t.Fatalf("app uses %q after failed adds", got.Uses)
	}

	// Edges written in a transaction are read back through it.
	create(t, s, instance(3, "cap.type.cache", "0.1.0", "default", "cache"))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddUses(ctx, id(1), id(3)); err != nil {
			return err
		}
		if got := get(t, tx, id(1)); !slices.Equal(got.Uses, []string{id(3), id(2)}) {
			t.Errorf("tx: app uses %q, want [cache db]", got.Uses)
		}
		return nil
	})
}

// testUsesOrder checks the documented order of Uses and UsedBy: type path
// ascending, revision descending, createdAt descending.
func testUsesOrder(t *testing.T, s store.Store) {
	hub := instance(1, "cap.type.hub", "0.1.0", "default", "hub")
	others := []cairn.Instance{
		instance(2, "cap.type.b", "0.9.0", "default", "b-0.9-old"),
		instance(3, "cap.type.a", "0.1.0", "default", "a"),
		instance(4, "cap.type.b", "0.10.0", "default", "b-0.10"),
		instance(5, "cap.type.b", "0.9.0", "default", "b-0.9-new"), // created after 2
		instance(6, "cap.type.c", "1.0.0", "default", "c"),
	}
	want := []string{id(3), id(4), id(5), id(2), id(6)}
	create(t, s, append([]cairn.Instance{hub}, others...)...)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, o := range others {
			if err := tx.AddUses(ctx, hub.ID, o.ID); err != nil {
				return err
			}
			if err := tx.AddUses(ctx, o.ID, hub.ID); err != nil {
				return err
			}
		}
		return nil
	})
	got := get(t, s, hub.ID)
	if !slices.Equal(got.Uses, want) {
		t.Errorf("Uses = %q, want %q", got.Uses, want)
	}
	if !slices.Equal(got.UsedBy, want) {
		t.Errorf("UsedBy = %q, want %q", got.UsedBy, want)
	}
}

func testDeleteInstance(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := fullInstance(1)
	dep := instance(2, "cap.type.dep", "0.1.0", "default", "dep")
	create(t, s, in, dep)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddUses(ctx, in.ID, dep.ID); err != nil {
			return err
		}
		return tx.AddResourceVersion(ctx, in.ID, cairn.ResourceVersion{
			ResourceVersion: 2, CreatedAt: at(10),
			Attributes: []cairn.AttributeRef{{Path: "cap.attr.x", Revision: "0.1.0"}},
		})
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, in.ID) })

	if got, err := s.GetInstances(ctx, []string{in.ID}); err != nil || len(got) != 0 {
		t.Fatalf("GetInstances after delete = %q, %v; want none", ids(got), err)
	}
	_, err := s.GetInstanceByName(ctx, in.TypeRef.Path, in.Namespace, in.Name)
	wantCode(t, err, cairn.CodeNotFound)
	_, err = s.ResourceVersions(ctx, in.ID)
	wantCode(t, err, cairn.CodeNotFound)
	_, err = s.ResourceVersion(ctx, in.ID, 1)
	wantCode(t, err, cairn.CodeNotFound)
	if n, err := s.CountInstances(ctx, in.TypeRef); err != nil || n != 0 {
		t.Fatalf("CountInstances after delete = %d, %v; want 0", n, err)
	}
	for _, f := range []store.InstanceFilter{
		{Labels: []labels.Requirement{{Key: "env", Operator: labels.Exists}}},
		{Attributes: []store.AttributeFilter{{Path: "cap.attr.x"}}},
	} {
		if got, err := s.ListInstances(ctx, f); err != nil || len(got) != 0 {
			t.Fatalf("ListInstances(%+v) after delete = %q, %v; want none", f, ids(got), err)
		}
	}
	// The outgoing edge is gone, so the used instance is free.
	if got := get(t, s, dep.ID); len(got.UsedBy) != 0 {
		t.Fatalf("dep used by %q after its user was deleted", got.UsedBy)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, dep.ID) })

	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, in.ID) })
	wantCode(t, err, cairn.CodeNotFound)

	// The id and the name can be used again, starting over at version 1.
	create(t, s, in)
	want := in
	want.Uses, want.UsedBy = nil, nil
	wantInstance(t, get(t, s, in.ID), want)
	if rvs, err := s.ResourceVersions(ctx, in.ID); err != nil || len(rvs) != 1 {
		t.Fatalf("ResourceVersions of the recreated instance = %d, %v; want 1 version", len(rvs), err)
	}
}

func testDeleteUsedBy(t *testing.T, s store.Store) {
	db := instance(1, "cap.type.db", "0.1.0", "default", "db")
	app := instance(2, "cap.type.app", "0.1.0", "default", "app")
	job := instance(3, "cap.type.job", "0.1.0", "default", "job")
	create(t, s, db, app, job)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddUses(ctx, app.ID, db.ID); err != nil {
			return err
		}
		return tx.AddUses(ctx, job.ID, db.ID)
	})

	err := try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, db.ID) })
	wantCode(t, err, cairn.CodeUsedBy)
	wantIDs(t, err, app.ID, job.ID)
	get(t, s, db.ID) // still there

	update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, app.ID) })
	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, db.ID) })
	wantCode(t, err, cairn.CodeUsedBy)
	wantIDs(t, err, job.ID)

	// Users and the used instance can go in one transaction, users first.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.DeleteInstance(ctx, job.ID); err != nil {
			return err
		}
		return tx.DeleteInstance(ctx, db.ID)
	})
	if got, err := s.ListInstances(t.Context(), store.InstanceFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("ListInstances = %q, %v; want none", ids(got), err)
	}
}

// testBackendUses checks that an instance uses its backend when that is
// another instance, as if AddUses had added the edge: whether or not it
// did (the hub does), Uses, UsedBy, lists and deletes see the edge, in the
// documented order among the others; adding it again changes and logs
// nothing; removing it is a no-op. An instance that is its own backend
// does not use itself.
func testBackendUses(t *testing.T, s store.Store) {
	ctx := t.Context()
	builtin := instance(1, "cap.type.backend", "0.1.0", "system", "builtin")
	builtin.Backend = cairn.BackendRef{ID: builtin.ID, Abstract: true}
	git := instance(2, "cap.type.backend", "0.1.0", "system", "git")
	git.Backend = cairn.BackendRef{ID: builtin.ID, Abstract: true}
	a := instance(3, "cap.type.a", "0.1.0", "default", "a")
	a.Backend = cairn.BackendRef{ID: git.ID}
	b := instance(4, "cap.type.b", "0.1.0", "default", "b")
	b.Backend = cairn.BackendRef{ID: builtin.ID, Abstract: true}
	create(t, s, builtin, git)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, a); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, a.ID, git.ID); err != nil { // as the hub does
			return err
		}
		if err := tx.CreateInstance(ctx, b); err != nil {
			return err
		}
		return tx.AddUses(ctx, b.ID, a.ID)
	})
	want := map[string][2][]string{ // uses, used by
		builtin.ID: {nil, {b.ID, git.ID}},
		git.ID:     {{builtin.ID}, {a.ID}},
		a.ID:       {{git.ID}, {b.ID}},
		b.ID:       {{a.ID, builtin.ID}, nil},
	}
	check := func(when string) {
		t.Helper()
		all, err := s.ListInstances(ctx, store.InstanceFilter{})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]cairn.Instance{}
		for _, in := range all {
			listed[in.ID] = in
		}
		for id, w := range want {
			for _, got := range []cairn.Instance{get(t, s, id), listed[id]} {
				if !slices.Equal(got.Uses, w[0]) || !slices.Equal(got.UsedBy, w[1]) {
					t.Errorf("%s: %s uses %q, used by %q; want %q, %q", when, got.Name, got.Uses, got.UsedBy, w[0], w[1])
				}
			}
		}
	}
	check("created")

	seq, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.AddUses(ctx, a.ID, git.ID); err != nil {
			return err
		}
		return tx.RemoveUses(ctx, a.ID, git.ID)
	})
	check("after adding and removing a backend edge")
	if now, err := s.LastSeq(ctx); err != nil || now != seq {
		t.Errorf("LastSeq = %d, %v after adding and removing a backend edge; want %d: nothing changed", now, err, seq)
	}

	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, git.ID) })
	wantCode(t, err, cairn.CodeUsedBy)
	wantIDs(t, err, a.ID)
	err = try(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteInstance(ctx, builtin.ID) })
	wantCode(t, err, cairn.CodeUsedBy)
	wantIDs(t, err, b.ID, git.ID)

	// Users first, then the backends they used.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{b.ID, a.ID, git.ID, builtin.ID} {
			if err := tx.DeleteInstance(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}
