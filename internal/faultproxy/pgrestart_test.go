package faultproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestReplicasAcrossPostgresRestart runs two hubs (replicas) on a
// PostgreSQL server of the test's own while writers create and update on
// both, and restarts the server twice in the middle: a clean restart
// (pg_ctl stop -m fast) and a crash (-m immediate, then WAL recovery).
// Every acknowledged write must be in the database afterwards with its
// value, no request may outlive its deadline by more than a second, no
// write may be refused for anything but the outage, both replicas must
// write again without a restart, and a watch on one replica, resumed from
// its last position whenever it fails, must see every acknowledged write
// of both. Once the server is back, no request begun after that fails.
func TestReplicasAcrossPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a PostgreSQL server under load for seconds")
	}
	srv := pgtest.StartServer(t)
	ctx := cairn.WithActor(context.Background(), "restart")
	var hubs []*hub.Hub
	var direct *postgres.Store
	for range 2 {
		st, err := postgres.Open(ctx, srv.DSN, postgres.WithMaxConns(4))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		direct = st
		h, err := hub.New(ctx, hub.Config{Store: st, StoreKind: "postgresql", PollInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		hubs = append(hubs, h)
	}

	// The watch on replica 1: instance id -> changes seen.
	var (
		wmu  sync.Mutex
		seen = map[string]int{}
		last int64
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	t.Cleanup(func() { stopWatch(); <-watched })
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			err := hubs[1].Watch(watchCtx, last, func(c store.Change) error {
				wmu.Lock()
				defer wmu.Unlock()
				if c.Seq <= last {
					t.Errorf("watch: change %d after %d: the watch went back", c.Seq, last)
				}
				last = c.Seq
				seen[c.InstanceID]++
				return nil
			})
			if err != nil && cairn.HasCode(err, cairn.CodeGone) {
				t.Errorf("watch: %v", err)
				return
			}
			// The database went away: resume from the last position, as
			// a client does.
			select {
			case <-watchCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	const deadline = 2 * time.Second
	typ := cairn.TypeRef{Path: "cap.type.test.restart", Revision: "0.1.0"}
	// The writers run until 1.5s after the server came back the last time.
	var stopping sync.WaitGroup
	stopping.Add(1)
	done := make(chan struct{})
	go func() { stopping.Wait(); time.Sleep(1500 * time.Millisecond); close(done) }()
	work, wait := startWorkload(ctx, hubs, typ, deadline, 20*time.Millisecond, func(*workload) bool {
		select {
		case <-done:
			return false
		default:
			return true
		}
	})

	// The restarts, while the writers run.
	var downtime []time.Duration
	var up time.Time
	for _, mode := range []string{"fast", "immediate"} {
		time.Sleep(1500 * time.Millisecond)
		down := time.Now()
		srv.Stop(mode)
		// Down long enough that every pooled connection has been idle
		// for more than pgx's 1s health-check threshold when it is next
		// used (and, at that, for a real outage).
		time.Sleep(1200 * time.Millisecond)
		srv.Start()
		up = time.Now()
		downtime = append(downtime, up.Sub(down))
	}
	stopping.Done()
	wait()
	acked, ambiguous, failedAt, refusals, slowest := work.acked, work.ambiguous, work.failedAt, work.refusals, work.slowest
	// Once the server is back, the replicas' pools hand out live
	// connections: no request begun after that fails.
	for _, at := range failedAt {
		if at.After(up) {
			t.Errorf("a write begun %s after PostgreSQL was back failed", at.Sub(up))
		}
	}

	if limit := deadline + time.Second; slowest > limit {
		t.Errorf("the slowest request took %s, past its deadline (%s)", slowest, limit)
	}
	if len(acked) < 10 || ambiguous == 0 {
		t.Fatalf("%d writes acknowledged, %d failed: the restarts did not exercise both", len(acked), ambiguous)
	}
	for _, err := range refusals {
		t.Errorf("a write was refused, not failed, by the restart: %v", err)
	}
	// Both replicas write again without a restart of their own.
	for r, h := range hubs {
		back := time.Now()
		for {
			rctx, cancel := context.WithTimeout(ctx, deadline)
			c, err := h.CreateInstances(rctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				Name: fmt.Sprintf("after-%d", r), TypeRef: typ, Value: json.RawMessage(`{"n":0}`)}}})
			cancel()
			if err == nil {
				acked[c[0].ID] = 0
				break
			}
			if cairn.HasCode(err, cairn.CodeAlreadyExists) {
				t.Fatalf("replica %d: %v", r, err)
			}
			if time.Since(back) > 30*time.Second {
				t.Fatalf("replica %d still fails 30s after PostgreSQL came back: %v", r, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Every acknowledged write is in the database with its value.
	for id, n := range acked {
		insts, err := direct.GetInstances(ctx, []string{id})
		if err != nil || len(insts) != 1 {
			t.Errorf("acknowledged instance %s: %v (found %d)", id, err, len(insts))
			continue
		}
		val, err := direct.Value(ctx, id, insts[0].Latest.ResourceVersion)
		var got struct{ N int }
		if err != nil || json.Unmarshal(val, &got) != nil || got.N != n {
			t.Errorf("instance %s: value %s (%v), acknowledged n=%d", id, val, err, n)
		}
	}
	// The watch saw every acknowledged write: a create and n updates.
	missed := func() []string {
		wmu.Lock()
		defer wmu.Unlock()
		var out []string
		for id, n := range acked {
			if seen[id] < n+1 {
				out = append(out, fmt.Sprintf("%s (%d of %d changes)", id, seen[id], n+1))
			}
		}
		return out
	}
	for wait := time.Now(); len(missed()) > 0 && time.Since(wait) < 10*time.Second; {
		time.Sleep(100 * time.Millisecond)
	}
	stopWatch()
	<-watched
	if m := missed(); len(m) > 0 {
		t.Errorf("the watch on replica 1 missed changes of %d acknowledged instances: %v", len(m), m)
	}
	t.Logf("%d instances acknowledged, %d writes failed with an unknown outcome, slowest %s, PostgreSQL down %v", len(acked), ambiguous, slowest, downtime)
}
