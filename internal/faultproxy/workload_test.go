package faultproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// workload is what two writers per replica did while faults happened:
// creates and updates of instances of one Type, each with its own
// deadline, tallied by outcome. Its fields are guarded by mu until wait
// returned.
type workload struct {
	mu        sync.Mutex
	acked     map[string]int // id -> acknowledged n
	ambiguous int            // writes whose outcome the client cannot know
	failedAt  []time.Time    // when each of those began
	refusals  []error        // writes refused, not failed
	slowest   time.Duration
}

// startWorkload starts the writers; they run while more(w) says so (more
// takes w.mu itself if it reads the tallies), pausing backoff after a
// failure as a client would. wait waits for them to end.
func startWorkload(ctx context.Context, hubs []*hub.Hub, typ cairn.TypeRef, deadline, backoff time.Duration, more func(w *workload) bool) (w *workload, wait func()) {
	w = &workload{acked: map[string]int{}}
	var wg sync.WaitGroup
	for r, h := range hubs {
		for wr := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []string
				for i := 0; more(w); i++ {
					rctx, cancel := context.WithTimeout(ctx, deadline)
					began := time.Now()
					var id string
					var n int
					var err error
					if len(mine) > 0 && i%2 == 1 {
						id = mine[i%len(mine)]
						w.mu.Lock()
						n = w.acked[id] + 1
						w.mu.Unlock()
						_, err = h.UpdateInstances(rctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}})
					} else {
						var c []hub.Created
						c, err = h.CreateInstances(rctx, hub.CreateRequest{Instances: []hub.NewInstance{{
							Name: fmt.Sprintf("r%d-w%d-%d", r, wr, i), TypeRef: typ, Value: json.RawMessage(`{"n":0}`)}}})
						if err == nil {
							id = c[0].ID
							mine = append(mine, id)
						}
					}
					took := time.Since(began)
					cancel()
					w.mu.Lock()
					w.slowest = max(w.slowest, took)
					switch {
					case err == nil:
						w.acked[id] = n
					case cairn.HasCode(err, cairn.CodeUnavailable) || rctx.Err() != nil:
						// The outcome is unknown to the client: the commit
						// may or may not have happened, so its value is
						// left out.
						w.ambiguous++
						w.failedAt = append(w.failedAt, began)
						if id != "" {
							mine = slices.DeleteFunc(mine, func(x string) bool { return x == id })
							delete(w.acked, id)
						}
					default:
						w.refusals = append(w.refusals, err)
					}
					w.mu.Unlock()
					if err != nil && backoff > 0 {
						time.Sleep(backoff)
					}
				}
			}()
		}
	}
	return w, wg.Wait
}
