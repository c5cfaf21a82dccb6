package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// A write through one replica reaches a watch on another through
// LISTEN/NOTIFY: the watching replica polls every ten minutes, so only the
// notification can bring the change within the test's time.
func TestWatchHearsOtherReplicaAtOnce(t *testing.T) {
	ctx := t.Context()
	a, b, typ := twoReplicas(t)
	seen, done, cancel := watchFromNow(t, b, 10)
	defer cancel()
	create := func(name string) string {
		t.Helper()
		c, err := a.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: name, Name: name, Namespace: "default",
			TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c[0].Instance.ID
	}
	expect := func(id string) {
		t.Helper()
		select {
		case c := <-seen:
			if c.InstanceID != id || c.Kind != store.Added {
				t.Fatalf("watch saw %s %s, want ADDED %s", c.Kind, c.InstanceID, id)
			}
		case err := <-done:
			t.Fatalf("watch ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("the watch on the other replica did not see %s: not notified (it polls every ten minutes)", id)
		}
	}
	// The first write may come with the watch's first read of the log; by
	// the time it is seen, the watch waits, and the next writes can only
	// reach it by notification.
	expect(create("g1"))
	for _, name := range []string{"g2", "g3", "g4"} {
		expect(create(name))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A notification names the position of its commit's newest change, so a
// replica's watchers read the log up to there without asking the store;
// one that names none (a replica of an earlier version sends the schema
// alone) is still heard, and one of another schema is not.
func TestNotificationNamesThePosition(t *testing.T) {
	pgtest.DSN(t)
	sc := pgtest.NewSchema(t)
	other := pgtest.NewSchema(t)
	ctx := t.Context()
	writer := sc.Open(t)
	a, err := hub.New(ctx, hub.Config{Store: writer, StoreKind: "postgresql"})
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan int64, 16)
	ready := make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sc.Open(t).ListenChanges(lctx, func() { close(ready) }, func(seq int64) { heard <- seq })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ListenChanges: %v", err)
	}
	next := func() int64 {
		t.Helper()
		select {
		case seq := <-heard:
			return seq
		case <-time.After(30 * time.Second):
			t.Fatal("no notification")
		}
		return 0
	}
	typ, err := a.CreateType(ctx, cairn.Type{Path: "org.example.gadget", Revision: "0.1.0", JSONSchema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} { // one change, then three in one transaction
		var news []hub.NewInstance
		for i := range n {
			name := fmt.Sprintf("g%d-%d", n, i)
			news = append(news, hub.NewInstance{Alias: name, Name: name, Namespace: "default", TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)})
		}
		if _, err := a.CreateInstances(ctx, hub.CreateRequest{Instances: news}); err != nil {
			t.Fatal(err)
		}
		last, err := writer.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := next(); seq != last; seq = next() {
			if seq > last || seq == 0 {
				t.Fatalf("notified of position %d, the log ends at %d", seq, last)
			}
			// an earlier commit (the Type's) still on its way
		}
	}
	other.Exec(t, `SELECT pg_notify('cairn_changes', $1)`, other.Name+" 99")
	sc.Exec(t, `SELECT pg_notify('cairn_changes', $1)`, sc.Name)
	if seq := next(); seq != 0 {
		t.Errorf("a notification naming no position gave %d (or another schema's was heard)", seq)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A watch whose own replica and another write in turn sees every change
// once and in order: commits through its own replica wake it without a
// position (it asks the store), the other's name theirs (it reads up to
// there), and neither may hide the other. The watch polls every ten
// minutes, so only the signals can bring the changes in time.
func TestWatchSeesOwnAndOtherReplicasWritesInOrder(t *testing.T) {
	ctx := t.Context()
	a, b, typ := twoReplicas(t)
	seen, done, cancel := watchFromNow(t, b, 64)
	defer cancel()
	var want []string
	for i := range 8 {
		through := []*hub.Hub{a, b}[i%2]
		name := fmt.Sprintf("g%d", i)
		c, err := through.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: name, Name: name, Namespace: "default",
			TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c[0].Instance.ID)
		if i%3 == 2 {
			continue // sometimes the next write comes before this one is seen
		}
		for len(want) > 0 {
			select {
			case c := <-seen:
				if c.InstanceID != want[0] || c.Kind != store.Added {
					t.Fatalf("watch saw %s %s, want ADDED %s next", c.Kind, c.InstanceID, want[0])
				}
				want = want[1:]
			case err := <-done:
				t.Fatalf("watch ended: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatalf("the watch did not see %s (write %d, through replica %d)", want[0], i, i%2)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(want) > 0 {
		t.Fatalf("not seen: %v", want)
	}
	select {
	case c := <-seen:
		t.Fatalf("an extra change: %s %s", c.Kind, c.InstanceID)
	default:
	}
}

// Watchers on one replica keep up with writes through another in quick
// succession: every watcher reaches the last write although the replica
// polls every ten minutes, so no notification's wake-up may be lost,
// whichever watcher applies the log and however the notifications bunch.
func TestWatchersKeepUpWithRapidWrites(t *testing.T) {
	ctx := t.Context()
	a, b, typ := twoReplicas(t)
	c, err := a.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "g", Name: "g", Namespace: "default",
		TypeRef: typ.Ref(), Value: json.RawMessage(`{"n":0}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := c[0].Instance.ID
	start, err := b.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const watchers, writes = 8, 60
	last := make([]chan int64, watchers)
	done := make(chan error, watchers)
	for w := range watchers {
		last[w] = make(chan int64, writes+1)
		go func() {
			prev := start
			done <- b.Watch(wctx, start, func(ch store.Change) error {
				if ch.Seq <= prev {
					return fmt.Errorf("watcher %d: change %d after %d", w, ch.Seq, prev)
				}
				prev = ch.Seq
				last[w] <- ch.Seq
				return nil
			})
		}()
	}
	for i := 1; i <= writes; i++ {
		if _, err := a.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	end, err := a.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for w := range watchers {
		for seen := int64(0); seen < end; {
			select {
			case seen = <-last[w]:
			case err := <-done:
				t.Fatalf("a watch ended: %v", err)
			case <-deadline:
				t.Fatalf("watcher %d reached change %d of %d: a wake-up was lost (the replica polls every ten minutes)", w, seen, end)
			}
		}
	}
	cancel()
	for range watchers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// twoReplicas opens two hubs on one new schema, the second polling only
// every ten minutes (so only a notification brings it another's change in
// a test's time), and registers a Type through the first.
func twoReplicas(t *testing.T) (a, b *hub.Hub, typ cairn.Type) {
	t.Helper()
	pgtest.DSN(t)
	sc := pgtest.NewSchema(t)
	ctx := t.Context()
	a, err := hub.New(ctx, hub.Config{Store: sc.Open(t), StoreKind: "postgresql"})
	if err != nil {
		t.Fatal(err)
	}
	b, err = hub.New(ctx, hub.Config{Store: sc.Open(t), StoreKind: "postgresql", PollInterval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	typ, err = a.CreateType(ctx, cairn.Type{Path: "org.example.gadget", Revision: "0.1.0", JSONSchema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return a, b, typ
}

// watchFromNow starts a watch on h from the change log's current position;
// each change arrives on seen (buffered to size), the watch's end on done.
// cancel ends it.
func watchFromNow(t *testing.T, h *hub.Hub, size int) (seen chan store.Change, done chan error, cancel context.CancelFunc) {
	t.Helper()
	start, err := h.LastSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(t.Context())
	seen = make(chan store.Change, size)
	done = make(chan error, 1)
	go func() {
		done <- h.Watch(wctx, start, func(c store.Change) error { seen <- c; return nil })
	}()
	return seen, done, cancel
}
