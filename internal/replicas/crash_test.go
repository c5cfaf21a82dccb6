package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestReplicaCrash kills one of two replicas with SIGKILL (kill -9) while
// its clients' writes are in flight. The other replica keeps serving (the
// killed one's clients fail over to it), PostgreSQL rolls back what the dead
// replica had open, and the database passes the same invariant checks as
// TestReplicas: every write acknowledged before the kill is there, a write
// whose answer was lost is there entirely or not at all, nothing is
// half-written. A replica started again on the database serves exactly its
// state.
func TestReplicaCrash(t *testing.T) {
	pgtest.DSN(t)
	bin := cairnBinary(t)
	db := newDatabase(t)
	a := startReplica(t, bin, db, "a")
	b := startReplica(t, bin, db, "b")
	typ := registerFlag(t, a, b)

	w := newWorkload(a, b)
	killAfter := int64(w.ops * 2 / 5)
	t.Logf("workload: %d clients alternating between replicas a and b, %d operations, seed %d; b is killed after %d operations, with writes in flight",
		w.clients, w.ops, w.seed, killAfter)

	// The killer waits for the trigger, then for at least two writes in
	// flight on b, and sends SIGKILL.
	var (
		trigger  = make(chan struct{})
		once     sync.Once
		killed   = make(chan struct{})
		killErr  error
		killedAt time.Time
		inFlight int64
	)
	w.afterOp = func(done int64) {
		if done >= killAfter {
			once.Do(func() { close(trigger) })
		}
	}
	go func() {
		defer close(killed)
		<-trigger
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for b.inflightWrites.Load() < 2 {
			if time.Now().After(deadline) {
				killErr = fmt.Errorf("no two writes in flight on b within 10s")
				return
			}
			<-tick.C
		}
		inFlight, killedAt = b.inflightWrites.Load(), time.Now()
		killErr = b.kill()
	}()
	w.run(t, typ)
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the killer did not finish")
	}
	if killErr != nil {
		t.Fatalf("kill -9 of replica b: %v\n%s", killErr, b.logs)
	}
	if !b.killed.Load() || killedAt.IsZero() {
		t.Fatal("replica b was not killed during the workload")
	}
	t.Logf("kill -9 of replica b with %d writes in flight", inFlight)

	// The surviving replica kept serving, the killed one's clients too.
	var afterKill, failedOver, lost int
	for _, o := range w.log {
		switch {
		case o.Outcome == acked && o.Start.After(killedAt):
			afterKill++
			if o.Client%2 == 1 {
				failedOver++
			}
		case o.Outcome == unknown:
			lost++
			if o.Replica != b.name {
				t.Errorf("%s: no answer from the surviving replica", o)
			}
		}
	}
	if afterKill == 0 || failedOver == 0 {
		t.Errorf("after the kill, %d writes were acknowledged, %d of them for b's clients through a: want both > 0", afterKill, failedOver)
	}
	t.Logf("after the kill: %d writes acknowledged through a (%d for b's former clients); %d writes without an answer", afterKill, failedOver, lost)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.client.Healthy(ctx); err != nil {
		t.Errorf("replica a after the kill: %v", err)
	}

	// PostgreSQL noticed the dead replica's connections and rolled back
	// what they had open (their locks with it).
	conn := db.conn(t)
	poll(t, 15*time.Second, "the killed replica's sessions are gone", func() error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, b.app).Scan(&n); err != nil {
			return fmt.Errorf("pg_stat_activity: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("%d sessions of %s remain", n, b.app)
		}
		return nil
	})

	c := newChecker(t, db, typ, w)
	c.run()

	// A replica started again serves exactly what the database holds, and
	// takes writes.
	b2 := startReplica(t, bin, db, "b2")
	list, err := b2.client.ListAll(ctx, flags, namespace, client.ListOptions{})
	if err != nil {
		t.Fatalf("list through the restarted replica: %v", err)
	}
	served := map[string]rest.Object{}
	for _, raw := range list.Items {
		var o rest.Object
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		served[o.Metadata.UID] = o
	}
	for id, in := range c.insts {
		o, ok := served[id]
		toks := c.tokens[id]
		if !ok || o.Metadata.Generation != int64(in.Latest.ResourceVersion) || tokenOf(o.Spec) != toks[len(toks)-1] || o.Status.LockedBy != in.LockedBy {
			t.Errorf("the restarted replica serves %s as %+v, the database holds version %d %q locked by %q", id, o, in.Latest.ResourceVersion, toks[len(toks)-1], in.LockedBy)
		}
	}
	if len(served) != len(c.insts) {
		t.Errorf("the restarted replica serves %d flags, the database holds %d", len(served), len(c.insts))
	}
	obj := rest.Object{APIVersion: "flipt.io/v1alpha1", Kind: "Flag", Metadata: rest.ObjectMeta{Name: "after-restart"}, Spec: value("b2")}
	if _, err := b2.client.Create(ctx, flags, "restart", obj); err != nil {
		t.Fatalf("create through the restarted replica: %v", err)
	}
	if raw, err := a.client.Get(ctx, flags, "restart", "after-restart"); err != nil || tokenOf(mustSpec(t, raw)) != "b2" {
		t.Fatalf("a reads the restarted replica's write: %s, %v", raw, err)
	}
	t.Logf("checked: a replica restarted on the database serves its state (%d flags) and takes writes", len(served))
}

func mustSpec(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var o rest.Object
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return o.Spec
}
