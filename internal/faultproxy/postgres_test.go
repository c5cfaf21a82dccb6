package faultproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/faultproxy"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestReplicasThroughFaultyNetwork runs two hubs (replicas) on one
// PostgreSQL schema, each reaching the database through a proxy that
// delays, black-holes, resets and refuses connections while writers
// create and update. Every acknowledged write must be in the database, no
// request may outlive its deadline by more than a second, and both
// replicas must write again once the network heals, without a restart.
func TestReplicasThroughFaultyNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a faulty network for seconds")
	}
	schema := pgtest.NewSchema(t)
	direct := schema.Open(t) // migrates; the reference reader, not proxied
	u, err := url.Parse(schema.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	ctx := cairn.WithActor(context.Background(), "chaos")
	var hubs []*hub.Hub
	for range 2 {
		st, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema.Name), postgres.WithMaxConns(4))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, err := hub.New(ctx, hub.Config{Store: st, StoreKind: "postgresql"})
		if err != nil {
			t.Fatal(err)
		}
		hubs = append(hubs, h)
	}

	chaosCtx, stopChaos := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		pass := func() { proxy.Set(faultproxy.Pass, 0) }
		faults := []func(){
			pass, pass,
			func() { proxy.Set(faultproxy.Delay, 100*time.Millisecond) },
			pass, pass,
			func() { proxy.Reset() },
			pass, pass,
			func() { proxy.Set(faultproxy.Blackhole, 0) },
			pass, pass,
			func() { proxy.Set(faultproxy.Refuse, 0); proxy.Reset() },
		}
		for i := 0; ; i++ {
			faults[i%len(faults)]()
			select {
			case <-chaosCtx.Done():
				proxy.Set(faultproxy.Pass, 0)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	const deadline = 2 * time.Second
	typ := cairn.TypeRef{Path: "cap.type.test.chaos", Revision: "0.1.0"}
	// Run at least 6 s, and on until both outcomes were seen enough times
	// (a loaded machine acknowledges fewer writes per second), at most 60 s.
	start := time.Now()
	work, wait := startWorkload(ctx, hubs, typ, deadline, 0, func(w *workload) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		ran := time.Since(start)
		return ran < 6*time.Second || (ran < 60*time.Second && (len(w.acked) < 10 || w.ambiguous == 0))
	})
	wait()
	acked, ambiguous, refusals, slowest := work.acked, work.ambiguous, work.refusals, work.slowest
	stopChaos()
	cwg.Wait()

	if limit := deadline + time.Second; slowest > limit {
		t.Errorf("the slowest request took %s, past its deadline (%s)", slowest, limit)
	}
	if len(acked) < 10 || ambiguous == 0 {
		t.Fatalf("%d writes acknowledged, %d failed: the chaos did not exercise both", len(acked), ambiguous)
	}
	for _, err := range refusals {
		t.Errorf("a write was refused, not failed, by the faults: %v", err)
	}
	// Both replicas write again without a restart.
	for r, h := range hubs {
		healed := time.Now()
		for {
			rctx, cancel := context.WithTimeout(ctx, deadline)
			_, err := h.CreateInstances(rctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				Name: fmt.Sprintf("after-%d-%d", r, time.Now().UnixNano()), TypeRef: typ, Value: json.RawMessage(`{"n":0}`)}}})
			cancel()
			if err == nil {
				break
			}
			if time.Since(healed) > 30*time.Second {
				t.Fatalf("replica %d still fails 30s after the network healed: %v", r, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Every acknowledged write is in the database.
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
	t.Logf("%d instances acknowledged, %d writes failed with an unknown outcome, slowest %s", len(acked), ambiguous, slowest)
}
