package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// clock is a hub.Config.Now the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func holds(t *testing.T, f *faulty, id string, rv int) bool {
	t.Helper()
	_, err := f.Backend.GetValue(context.Background(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: rv})
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("GetValue(%s, %d): %v", id, rv, err)
	}
	return err == nil
}

func pending(t *testing.T, e *env) []store.Intent {
	t.Helper()
	ins, err := e.h.PendingIntents(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func runRecover(t *testing.T, e *env, grace time.Duration) hub.RecoveryResult {
	t.Helper()
	res, err := e.h.Recover(e.ctx, grace)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return res
}

// TestJournalRetriesFailedRollback: a create whose store commit fails and
// whose rollback fails too (the backend is down) leaves its intent;
// recovery leaves it alone during the grace period, retries with backoff
// while the backend is down and undoes the value once it is back.
func TestJournalRetriesFailedRollback(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(cfg *hub.Config) { cfg.Now = c.now })
	bid, f := e.addBackend("ext", true, "")
	if ins := pending(t, e); len(ins) != 0 {
		t.Fatalf("intents after successful writes: %+v", ins)
	}
	e.takeNameDuringNextCreate(f, "taken")
	f.failOn("OnDelete", func(string) error { return errors.New("backend gone") })
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
		{Alias: "a", TypeRef: cfgType, Name: "taken", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}},
	}})
	wantContains(t, err, "rollback externally stored values", "backend gone")
	id := strings.TrimPrefix(f.called("OnCreate")[0], "OnCreate ")
	if !holds(t, f, id, 1) {
		t.Fatal("the backend should still hold the value whose rollback failed")
	}
	ins := pending(t, e)
	if len(ins) != 1 || ins[0].InstanceID != id || ins[0].ResourceVersion != 1 || ins[0].Op != store.IntentCreate || ins[0].BackendID != bid {
		t.Fatalf("intents = %+v, want the create of %s", ins, id)
	}

	if res := runRecover(t, e, time.Minute); res.Waiting != 1 || res.Undone+len(res.Failed) != 0 {
		t.Fatalf("within the grace period: %+v", res)
	}
	c.add(2 * time.Minute)
	res := runRecover(t, e, time.Minute)
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].LastError, "backend gone") || res.Failed[0].Attempts != 1 {
		t.Fatalf("backend down: %+v", res)
	}
	if res := runRecover(t, e, time.Minute); len(res.Failed)+res.Undone+res.Waiting != 0 {
		t.Fatalf("before the backoff ends the intent is not due: %+v", res)
	}
	f.failOn("OnDelete", nil)
	c.add(3 * time.Second)
	if res := runRecover(t, e, time.Minute); res.Undone != 1 || len(res.Failed) != 0 {
		t.Fatalf("backend back: %+v", res)
	}
	if holds(t, f, id, 1) {
		t.Fatal("recovery did not delete the orphaned value")
	}
	if ins := pending(t, e); len(ins) != 0 {
		t.Fatalf("intents after recovery: %+v", ins)
	}
}

// TestJournalFinishesWhatADeadProcessLeft stands for a process killed
// between the backend call and the commit: intents and backend values with
// no committed version, and an intent whose write did commit.
func TestJournalFinishesWhatADeadProcessLeft(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	x := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"v":1}`), Backend: &hub.BackendInput{ID: bid}})
	y := "7f0e4f56-3a51-4b4e-9d1e-3d1c5e0f7a21"
	ctx := context.Background()
	if _, err := f.Backend.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: y, Value: json.RawMessage(`{"v":"orphan"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Backend.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: x, NewResourceVersion: 2, NewValue: json.RawMessage(`{"v":2}`)}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, in := range []store.Intent{
		{InstanceID: y, ResourceVersion: 1, BackendID: bid, Op: store.IntentCreate, CreatedAt: old},
		{InstanceID: x, ResourceVersion: 2, BackendID: bid, Op: store.IntentUpdate, CreatedAt: old},
		{InstanceID: x, ResourceVersion: 1, BackendID: bid, Op: store.IntentCreate, CreatedAt: old}, // committed, not forgotten
	} {
		if err := e.st.Update(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PutIntent(ctx, in) }); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody writes the version a dead process was on its way to until
	// recovery has finished it.
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`{"v":3}`)}})
	wantContains(t, err, "already on its way")

	res := runRecover(t, e, time.Minute)
	if res.Committed != 1 || res.Undone != 2 || len(res.Failed) != 0 {
		t.Fatalf("Recover = %+v, want 1 committed, 2 undone", res)
	}
	if holds(t, f, y, 1) || holds(t, f, x, 2) {
		t.Fatal("values no committed version points to are still in the backend")
	}
	if !holds(t, f, x, 1) {
		t.Fatal("recovery deleted a committed value")
	}
	jsonEq(t, e.get(x).Latest.Value, `{"v":1}`)
	up, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`{"v":3}`)}})
	if err != nil || up[0].Latest.ResourceVersion != 2 {
		t.Fatalf("update after recovery: %v", err)
	}
	if ins := pending(t, e); len(ins) != 0 {
		t.Fatalf("intents left: %+v", ins)
	}
}

// TestJournalKeepsUnansweredWrites: a write the backend never answered (a
// timeout, a lost connection) may be stored, so its intent stays and
// recovery undoes it; a write the backend refused leaves nothing.
func TestJournalKeepsUnansweredWrites(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	x := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"v":1}`), Backend: &hub.BackendInput{ID: bid}})
	f.failOn("OnUpdate", func(id string) error {
		// Stored, then the answer was lost.
		if _, err := f.Backend.OnUpdate(context.Background(), cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"v":2}`)}); err != nil {
			return err
		}
		return &cairn.Error{Code: cairn.CodeUnavailable, Msg: "no answer within the deadline", Err: cairn.ErrNoAnswer}
	})
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`{"v":2}`)}})
	wantCode(t, err, cairn.CodeUnavailable)
	if ins := pending(t, e); len(ins) != 1 || ins[0].InstanceID != x || ins[0].ResourceVersion != 2 {
		t.Fatalf("intents after an unanswered update: %+v", ins)
	}
	if res := runRecover(t, e, 0); res.Undone != 1 || holds(t, f, x, 2) {
		t.Fatalf("Recover = %+v; revision 2 still stored: %v", res, holds(t, f, x, 2))
	}

	f.failOn("OnUpdate", func(string) error { return cairn.Errorf(cairn.CodeInvalid, "the backend refuses") })
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`{"v":2}`)}})
	wantCode(t, err, cairn.CodeInvalid)
	if ins := pending(t, e); len(ins) != 0 {
		t.Fatalf("intents after a refused update: %+v", ins)
	}
}

// TestJournalDeletes: a delete goes to the store first and to the backend
// after the commit, so nothing is lost when the store refuses; a backend
// that is down, or a process that dies before the backend did it, leaves
// the delete in the journal, and recovery finishes it.
func TestJournalDeletes(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(cfg *hub.Config) { cfg.Now = c.now })
	bid, f := e.addBackend("ext", true, "")
	newValue := func(v string) string {
		return e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(v), Backend: &hub.BackendInput{ID: bid}})
	}

	// The backend is asked once the metadata is gone, and the intent goes.
	a := newValue(`"a"`)
	var seen error
	f.failOn("OnDelete", func(id string) error {
		_, seen = e.h.GetInstance(e.ctx, id, false)
		return nil
	})
	if err := e.h.DeleteInstance(e.ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	if !cairn.HasCode(seen, cairn.CodeNotFound) {
		t.Fatalf("while the backend deleted the value, the hub still had the instance (%v)", seen)
	}
	if holds(t, f, a, 1) || len(pending(t, e)) != 0 {
		t.Fatalf("after a delete: value held %v, intents %+v", holds(t, f, a, 1), pending(t, e))
	}

	// A delete the store refuses never reaches the backend.
	b := newValue(`"b"`)
	if err := e.h.LockInstances(e.ctx, []string{b}, "owner-1"); err != nil {
		t.Fatal(err)
	}
	f.failOn("OnDelete", nil)
	wantCode(t, e.h.DeleteInstance(e.ctx, b, "owner-2"), cairn.CodeLocked)
	if !holds(t, f, b, 1) || len(f.called("OnDelete "+b)) != 0 || len(pending(t, e)) != 0 {
		t.Fatalf("a refused delete reached the backend or left an intent: %v %+v", f.called("OnDelete "+b), pending(t, e))
	}

	// The backend is down: the delete is done in the hub, the value waits
	// in the journal (with the lock owner the backend checks) until
	// recovery reaches the backend.
	f.failOn("OnDelete", func(string) error { return errors.New("connection refused") })
	if err := e.h.DeleteInstance(e.ctx, b, "owner-1"); err != nil {
		t.Fatalf("delete while the backend is down: %v", err)
	}
	if _, err := e.h.GetInstance(e.ctx, b, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("instance after its delete: %v", err)
	}
	ins := pending(t, e)
	if len(ins) != 1 || ins[0].InstanceID != b || ins[0].Op != store.IntentDelete || ins[0].OwnerID != "owner-1" || ins[0].BackendID != bid {
		t.Fatalf("intents = %+v, want the delete of %s by owner-1", ins, b)
	}
	if !holds(t, f, b, 1) {
		t.Fatal("the backend lost the value while it was down?")
	}
	if res := runRecover(t, e, time.Minute); res.Waiting != 1 {
		t.Fatalf("within the grace period: %+v", res)
	}
	c.add(2 * time.Minute)
	if res := runRecover(t, e, time.Minute); len(res.Failed) != 1 || !strings.Contains(res.Failed[0].LastError, "connection refused") {
		t.Fatalf("backend still down: %+v", res)
	}
	// backends check says what waits (this test's backends have no health
	// check, so the check itself fails).
	_, health, err := e.h.CheckBackend(e.ctx, bid)
	wantContains(t, err, "1 interrupted write waits for recovery (1 failed so far; latest error: ", "connection refused")
	if health.PendingWrites != 1 || health.RetryingWrites != 1 {
		t.Fatalf("CheckBackend health = %+v", health)
	}
	f.failOn("OnDelete", nil)
	c.add(3 * time.Second)
	if res := runRecover(t, e, time.Minute); res.Deleted != 1 || len(res.Failed) != 0 {
		t.Fatalf("backend back: %+v", res)
	}
	if holds(t, f, b, 1) || len(pending(t, e)) != 0 {
		t.Fatalf("after recovery: value held %v, intents %+v", holds(t, f, b, 1), pending(t, e))
	}

	// A dead process: x's delete committed but the backend was never
	// asked; y's delete was recorded but never committed.
	x, y := newValue(`"x"`), newValue(`"y"`)
	if err := e.h.LockInstances(e.ctx, []string{x}, "owner-1"); err != nil {
		t.Fatal(err)
	}
	if len(f.called("OnLock "+x)) != 1 {
		t.Fatal("the backend does not hold x's lock: the test would not show that recovery sends the owner")
	}
	old := c.now().Add(-time.Hour)
	if err := e.st.Update(e.ctx, func(ctx context.Context, tx store.Tx) error {
		for _, in := range []store.Intent{
			{InstanceID: x, ResourceVersion: 1, BackendID: bid, Op: store.IntentDelete, OwnerID: "owner-1", CreatedAt: old},
			{InstanceID: y, ResourceVersion: 1, BackendID: bid, Op: store.IntentDelete, CreatedAt: old},
		} {
			if err := tx.PutIntent(ctx, in); err != nil {
				return err
			}
		}
		return tx.DeleteInstance(ctx, x)
	}); err != nil {
		t.Fatal(err)
	}
	if res := runRecover(t, e, time.Minute); res.Deleted != 1 || res.Committed != 1 || len(res.Failed) != 0 {
		t.Fatalf("Recover = %+v, want x deleted and y's intent forgotten", res)
	}
	if holds(t, f, x, 1) || !holds(t, f, y, 1) {
		t.Fatalf("after recovery: x's value held %v (want false), y's %v (want true)", holds(t, f, x, 1), holds(t, f, y, 1))
	}
	jsonEq(t, e.get(y).Latest.Value, `"y"`)
	if ins := pending(t, e); len(ins) != 0 {
		t.Fatalf("intents left: %+v", ins)
	}
}

// batchRecoverer is a test backend that finishes interrupted writes
// together (cairn.BatchRecoverer) and fails as told.
type batchRecoverer struct {
	*faulty
	mu    sync.Mutex
	calls []int // the number of writes of each call
	fail  func(writes []cairn.RecoveryWrite) error
}

func (b *batchRecoverer) RecoverBatch(ctx context.Context, writes []cairn.RecoveryWrite) error {
	b.mu.Lock()
	b.calls = append(b.calls, len(writes))
	b.mu.Unlock()
	return b.fail(writes)
}

// TestRecoveryStopsTryingAloneWhenTheBackendIsDown: a backend that fails
// recovery's batch (not as unavailable) has each write tried alone; once
// one of those finds it unavailable, the others are retried later without
// being sent (a remote that went away: each call would wait out its
// timeout), all with the cause.
func TestRecoveryStopsTryingAloneWhenTheBackendIsDown(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("batchy", true, "")
	b := &batchRecoverer{faulty: f, fail: func(writes []cairn.RecoveryWrite) error {
		if len(writes) > 1 {
			return cairn.Errorf(cairn.CodeInternal, "one of them is odd")
		}
		return cairn.Errorf(cairn.CodeUnavailable, "remote gone")
	}}
	e.opener.mu.Lock()
	e.opener.backends["test://batchy"] = b
	e.opener.mu.Unlock()
	old := time.Now().Add(-time.Hour)
	for _, id := range []string{"7f0e4f56-3a51-4b4e-9d1e-3d1c5e0f7a21", "7f0e4f56-3a51-4b4e-9d1e-3d1c5e0f7a22", "7f0e4f56-3a51-4b4e-9d1e-3d1c5e0f7a23"} {
		in := store.Intent{InstanceID: id, ResourceVersion: 1, BackendID: bid, Op: store.IntentCreate, CreatedAt: old}
		if err := e.st.Update(e.ctx, func(ctx context.Context, tx store.Tx) error { return tx.PutIntent(ctx, in) }); err != nil {
			t.Fatal(err)
		}
	}
	res := runRecover(t, e, time.Minute)
	if len(res.Failed) != 3 {
		t.Fatalf("Recover = %+v, want the 3 failed", res)
	}
	for _, in := range res.Failed {
		if !strings.Contains(in.LastError, "remote gone") {
			t.Errorf("intent %s: last error %q, want the backend's", in.InstanceID, in.LastError)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) != 2 || b.calls[0] != 3 || b.calls[1] != 1 {
		t.Errorf("RecoverBatch calls (writes each) = %v, want [3 1]: the batch, then one alone until the backend is found down", b.calls)
	}
}
