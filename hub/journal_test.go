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
