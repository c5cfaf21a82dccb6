package hub_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

func TestWatchSeesWritesInOrder(t *testing.T) {
	e := newEnv(t)
	start, err := e.h.LastSeq(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	got := make(chan store.Change, 16)
	done := make(chan error, 1)
	go func() {
		done <- e.h.Watch(ctx, start, func(c store.Change) error { got <- c; return nil })
	}()

	id := e.create(hub.NewInstance{TypeRef: cfgType, Name: "w", Value: json.RawMessage(`1`)})
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`2`)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	want := []store.ChangeKind{store.Added, store.Modified, store.Deleted}
	for i, k := range want {
		select {
		case c := <-got:
			if c.Kind != k || c.InstanceID != id {
				t.Fatalf("change %d = %s %s, want %s %s", i, c.Kind, c.InstanceID, k, id)
			}
		case <-ctx.Done():
			t.Fatalf("no change %d (%s) before the deadline", i, k)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch returned %v after cancel, want nil", err)
	}
}

func TestWatchPrunedPositionIsGone(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`1`), Name: "p" + string(rune('a'+i))})
	}
	if err := e.h.PruneChanges(e.ctx, 2); err != nil {
		t.Fatal(err)
	}
	err := e.h.Watch(e.ctx, 1, func(store.Change) error { return nil })
	wantCode(t, err, cairn.CodeGone)
}
