package faultproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/faultproxy"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestBackendThroughFaultyNetwork writes through a hub whose gRPC backend
// (the file backend, a real server) sits behind a proxy that delays,
// black-holes, resets and refuses connections, and checks what the issue
// promises: every acknowledged write is there, nothing refused is left in
// the backend once recovery ran, and no request outlives its deadline.
func TestBackendThroughFaultyNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a faulty network for seconds")
	}
	ctx := cairn.WithActor(context.Background(), "chaos")
	values := t.TempDir()
	fb, err := file.New(file.Config{Dir: values})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := storagebackend.NewValueServer(fb, storagebackend.Options{})
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(sctx, lis) }()
	t.Cleanup(func() { stop(); <-served })
	proxy, err := faultproxy.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	const timeout = time.Second
	backends, err := grpcbackend.New(grpcbackend.Config{Timeout: timeout, ReadAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backends.Close() })
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "files", TypeRef: cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, proxy.Addr())),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	bid := c[0].ID
	typ := cairn.TypeRef{Path: "cap.type.test.chaos", Revision: "0.1.0"}

	// Chaos: a new fault every 150ms, in a fixed cycle.
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		faults := []func(){
			func() { proxy.Set(faultproxy.Pass, 0) },
			func() { proxy.Set(faultproxy.Delay, 200*time.Millisecond) },
			func() { proxy.Reset() },
			func() { proxy.Set(faultproxy.Blackhole, 0) },
			func() { proxy.Set(faultproxy.Pass, 0) },
			func() { proxy.Set(faultproxy.Refuse, 0); proxy.Reset() },
			func() { proxy.Set(faultproxy.Delay, 2*timeout) },
		}
		for i := 0; ; i++ {
			faults[i%len(faults)]()
			select {
			case <-chaosCtx.Done():
				proxy.Set(faultproxy.Pass, 0)
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()

	type acked struct {
		n  int
		rv int
	}
	var (
		mu      sync.Mutex
		ok      = map[string]acked{}
		refused int
		slowest time.Duration
	)
	var wg sync.WaitGroup
	// At least 4 s, and on until both outcomes were seen (a loaded
	// machine may need longer), at most 60 s.
	start := time.Now()
	more := func() bool {
		mu.Lock()
		defer mu.Unlock()
		ran := time.Since(start)
		return ran < 4*time.Second || (ran < 60*time.Second && (len(ok) == 0 || refused == 0))
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			for i := 0; more(); i++ {
				began := time.Now()
				var id string
				var a acked
				var err error
				if len(mine) > 0 && i%2 == 1 {
					id = mine[i%len(mine)]
					mu.Lock()
					a = ok[id]
					mu.Unlock()
					var up []cairn.Instance
					up, err = h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"n":` + strconv.Itoa(a.n+1) + `}`)}})
					if err == nil {
						a = acked{n: a.n + 1, rv: up[0].Latest.ResourceVersion}
					}
				} else {
					var c []hub.Created
					c, err = h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
						Name: fmt.Sprintf("c-%d-%d", w, i), TypeRef: typ, Value: json.RawMessage(`{"n":0}`), Backend: &hub.BackendInput{ID: bid}}}})
					if err == nil {
						id, a = c[0].ID, acked{n: 0, rv: 1}
						mine = append(mine, id)
					}
				}
				took := time.Since(began)
				mu.Lock()
				slowest = max(slowest, took)
				if err == nil {
					ok[id] = a
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopChaos()
	cwg.Wait()

	// A write may wait for its backend call (timeout) and for the rollback
	// call (timeout), plus the store: never much more.
	if limit := 2*timeout + time.Second; slowest > limit {
		t.Errorf("the slowest write took %s, past its deadlines (%s)", slowest, limit)
	}
	if len(ok) == 0 || refused == 0 {
		t.Fatalf("%d writes acknowledged, %d refused: the chaos did not exercise both", len(ok), refused)
	}

	// The network is healthy again: the hub reaches the backend again
	// without a restart (once gRPC's reconnect backoff lets it).
	healed := time.Now()
	for {
		_, _, err := h.CheckBackend(ctx, bid)
		if err == nil {
			break
		}
		if time.Since(healed) > 30*time.Second {
			t.Fatalf("the backend is still unreachable 30s after the network healed: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("backend reachable %s after the network healed", time.Since(healed).Round(time.Millisecond))

	// Recovery undoes what failed rollbacks and unanswered writes left,
	// once no delayed packet can still be on its way (the grace).
	const grace = 3 * timeout
	for start := time.Now(); ; {
		if _, err := h.Recover(ctx, grace); err != nil {
			t.Fatal(err)
		}
		pending, err := h.PendingIntents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("intents left after recovery on a healthy network: %+v", pending)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Every acknowledged write is there, with its value.
	for id, a := range ok {
		inst, err := h.GetInstance(ctx, id, true)
		if err != nil {
			t.Errorf("acknowledged instance %s: %v", id, err)
			continue
		}
		var v struct{ N int }
		if err := json.Unmarshal(inst.Latest.Value, &v); err != nil || v.N != a.n || inst.Latest.ResourceVersion != a.rv {
			t.Errorf("instance %s: resource version %d value %s, acknowledged %d with n=%d", id, inst.Latest.ResourceVersion, inst.Latest.Value, a.rv, a.n)
		}
	}
	// Nothing refused is left in the backend: every revision it holds is
	// one the hub has.
	entries, err := os.ReadDir(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		inst, err := h.GetInstance(ctx, e.Name(), false)
		known := err == nil
		files, _ := os.ReadDir(filepath.Join(values, e.Name()))
		for _, f := range files {
			var rv int
			if n, _ := fmt.Sscanf(f.Name(), "%d.json", &rv); n == 1 && (!known || rv > inst.Latest.ResourceVersion) {
				t.Errorf("the backend holds revision %d of %s, which the hub does not have (known %v)", rv, e.Name(), known)
			}
		}
	}
	t.Logf("%d writes acknowledged, %d refused, slowest %s", len(ok), refused, slowest)
}
