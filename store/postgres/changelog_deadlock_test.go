package postgres_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// A create of a taken name waits, in the unique index, for any transaction
// that has changed the row holding that name. A lock, unlock or metadata
// change must therefore not change the row before it holds the change-log
// lock: a create holds that lock from its insert on, so the two would wait
// for each other until PostgreSQL's deadlock detector (1s) aborts one. Found
// by internal/replicas, where a create of a taken name racing a lock of the
// instance holding it stalled both for a second.
func TestCreateOfTakenNameDoesNotDeadlock(t *testing.T) {
	pgtest.DSN(t)
	const (
		xID = "00000000-0000-4000-8000-000000000001"
		zID = "00000000-0000-4000-8000-000000000002"
		yID = "00000000-0000-4000-8000-000000000003"
	)
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	inst := func(id, name string) cairn.Instance {
		return cairn.Instance{ID: id, TypeRef: ref, Namespace: "default", Name: name, Latest: cairn.ResourceVersion{ResourceVersion: 1}}
	}
	for name, change := range map[string]func(ctx context.Context, tx store.Tx) error{
		"SetLockedBy": func(ctx context.Context, tx store.Tx) error { return tx.SetLockedBy(ctx, []string{xID}, "owner") },
		"SetMetadata": func(ctx context.Context, tx store.Tx) error {
			return tx.SetMetadata(ctx, xID, map[string]string{"a": "b"}, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			sc := pgtest.NewSchema(t)
			creator := sc.Open(t)
			// The changer's sessions are told apart in pg_stat_activity.
			app := "cairn-deadlock-test-" + sc.Name
			changerSchema := sc
			changerSchema.DSN = withParam(t, sc.DSN, "application_name", app)
			changer := changerSchema.Open(t)
			if err := creator.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				return tx.CreateInstance(ctx, inst(xID, "taken"))
			}); err != nil {
				t.Fatal(err)
			}

			var (
				mu                 sync.Mutex
				creates, changes   int
				takenErr           error
				holding, blocked   = make(chan struct{}), make(chan struct{})
				holdOnce, waitOnce sync.Once
				wg                 sync.WaitGroup
				errs               = make(chan error, 2)
			)
			// The creator takes the change-log lock (a create), waits until
			// the changer is blocked, then creates the taken name.
			wg.Go(func() {
				errs <- creator.Update(ctx, func(ctx context.Context, tx store.Tx) error {
					mu.Lock()
					creates++
					mu.Unlock()
					if err := tx.CreateInstance(ctx, inst(zID, "other")); err != nil {
						return err
					}
					holdOnce.Do(func() { close(holding) })
					<-blocked
					err := tx.CreateInstance(ctx, inst(yID, "taken"))
					mu.Lock()
					takenErr = err
					mu.Unlock()
					if cairn.HasCode(err, cairn.CodeAlreadyExists) {
						return nil
					}
					return err
				})
			})
			wg.Go(func() {
				<-holding
				errs <- changer.Update(ctx, func(ctx context.Context, tx store.Tx) error {
					mu.Lock()
					changes++
					mu.Unlock()
					return change(ctx, tx)
				})
			})
			// The changer waits for a lock (the change-log lock) ...
			waitForLockWait(t, sc.DSN, app)
			waitOnce.Do(func() { close(blocked) })
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
			}
			if !cairn.HasCode(takenErr, cairn.CodeAlreadyExists) {
				t.Errorf("create of the taken name: %v, want AlreadyExists", takenErr)
			}
			// ... and neither transaction was aborted and run again.
			if creates != 1 || changes != 1 {
				t.Errorf("the creator ran %d times, the changer %d times; want once each (a deadlock made PostgreSQL abort one)", creates, changes)
			}
			got, err := creator.GetInstances(ctx, []string{xID, zID})
			if err != nil || len(got) != 2 {
				t.Fatalf("GetInstances = %v, %v", got, err)
			}
		})
	}
}

// withParam adds a parameter to a postgres:// DSN (or a key=value one).
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " " + key + "=" + value
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// waitForLockWait polls until a session of application app waits for a
// lock.
func waitForLockWait(t *testing.T, dsn, app string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session of %s waits for a lock after 10s", app)
		}
		<-tick.C
	}
}

// Deleting an instance while another transaction creates one that uses it:
// the create holds the change-log lock and key-share locks the used
// instance for its edge, which the delete's FOR UPDATE blocks. The delete
// therefore takes the change-log lock before it locks the row; otherwise
// each would wait for the other until the deadlock detector aborted one.
// Found by internal/replicas (creates of a root using a leaf racing deletes
// of the leaf).
func TestDeleteOfUsedInstanceDoesNotDeadlock(t *testing.T) {
	pgtest.DSN(t)
	const (
		leafID = "00000000-0000-4000-8000-000000000001"
		rootID = "00000000-0000-4000-8000-000000000002"
	)
	ctx := t.Context()
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	sc := pgtest.NewSchema(t)
	creator := sc.Open(t)
	app := "cairn-delete-test-" + sc.Name
	deleterSchema := sc
	deleterSchema.DSN = withParam(t, sc.DSN, "application_name", app)
	deleter := deleterSchema.Open(t)
	if err := creator.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateInstance(ctx, cairn.Instance{ID: leafID, TypeRef: ref, Namespace: "default", Name: "leaf", Latest: cairn.ResourceVersion{ResourceVersion: 1}})
	}); err != nil {
		t.Fatal(err)
	}

	var (
		mu                 sync.Mutex
		creates, deletes   int
		holding, blocked   = make(chan struct{}), make(chan struct{})
		holdOnce, waitOnce sync.Once
		wg                 sync.WaitGroup
		createErr, delErr  error
	)
	// The creator creates the root (taking the change-log lock), waits
	// until the deleter is blocked, then adds the edge to the leaf.
	wg.Go(func() {
		createErr = creator.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			mu.Lock()
			creates++
			mu.Unlock()
			if err := tx.CreateInstance(ctx, cairn.Instance{ID: rootID, TypeRef: ref, Namespace: "default", Name: "root", Latest: cairn.ResourceVersion{ResourceVersion: 1}}); err != nil {
				return err
			}
			holdOnce.Do(func() { close(holding) })
			<-blocked
			return tx.AddUses(ctx, rootID, leafID)
		})
	})
	// The deleter locks the leaf as the hub does, then deletes it.
	wg.Go(func() {
		<-holding
		delErr = deleter.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			mu.Lock()
			deletes++
			mu.Unlock()
			if _, err := tx.GetInstances(ctx, []string{leafID}); err != nil {
				return err
			}
			return tx.DeleteInstance(ctx, leafID)
		})
	})
	waitForLockWait(t, sc.DSN, app)
	waitOnce.Do(func() { close(blocked) })
	wg.Wait()
	if createErr != nil {
		t.Fatalf("create of the root: %v", createErr)
	}
	if !cairn.HasCode(delErr, cairn.CodeUsedBy) {
		t.Errorf("delete of the leaf: %v, want UsedBy (the root was committed first)", delErr)
	}
	if creates != 1 || deletes != 1 {
		t.Errorf("the creator ran %d times, the deleter %d times; want once each (a deadlock made PostgreSQL abort one)", creates, deletes)
	}
	got, err := creator.GetInstances(ctx, []string{leafID})
	if err != nil || len(got) != 1 || len(got[0].UsedBy) != 1 || got[0].UsedBy[0] != rootID {
		t.Fatalf("leaf = %+v, %v; want it used by the root", got, err)
	}
}
