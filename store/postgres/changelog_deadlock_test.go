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
