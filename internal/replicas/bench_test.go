package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// BenchmarkReplicaThroughput measures acknowledged writes per second through
// the REST API of one and of two `cairn serve` replicas on one PostgreSQL,
// with the same clients: each runs its own instances through a life cycle
// of seven writes (create, PUT with resourceVersion, PATCH, lock, PUT as the
// lock owner, unlock, delete), so every write succeeds and no client waits
// for another's lock; with two replicas the clients alternate between them.
// One op is one write.
//
//	CAIRN_TEST_POSTGRES=postgres://… go test -run '^$' -bench ReplicaThroughput -benchtime 4000x ./internal/replicas
func BenchmarkReplicaThroughput(b *testing.B) {
	for _, clients := range []int{8, 32} {
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("clients=%d/replicas=%d", clients, n), func(b *testing.B) {
				benchThroughput(b, n, clients)
			})
		}
	}
}

func benchThroughput(b *testing.B, replicas, clients int) {
	pgtest.DSN(b)
	bin := cairnBinary(b)
	db := newDatabase(b)
	rs := make([]*replica, replicas)
	for i := range rs {
		rs[i] = startReplica(b, bin, db, string(rune('a'+i)))
	}
	registerFlag(b, rs...)

	var (
		next      atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		errs      []error
		latencies []time.Duration
	)
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			lc := &lifeCycle{r: rs[c%len(rs)], c: c}
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := lc.step(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// lifeCycle is one benchmark client's state: the instance it is at and
// the next write.
type lifeCycle struct {
	r    *replica
	c, k int
	n    int // the next write, 0..6
	cur  rest.Object
}

func (l *lifeCycle) step() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("b%d-%d", l.c, l.k)
	owner := fmt.Sprintf("bench-%d", l.c)
	spec := value(fmt.Sprintf("%s-%d", name, l.n))
	var out json.RawMessage
	var err error
	switch l.n {
	case 0:
		out, err = l.r.client.Create(ctx, flags, namespace, rest.Object{Metadata: rest.ObjectMeta{Name: name}, Spec: spec})
	case 1: // conditional, on the resourceVersion of the create's answer
		l.cur.Spec, l.cur.Status = spec, nil
		out, err = l.r.client.Replace(ctx, flags, namespace, name, l.cur, client.WriteOptions{})
	case 2:
		out, err = l.r.client.Patch(ctx, flags, namespace, name, client.MergePatch, []byte(`{"spec":`+string(spec)+`}`), client.WriteOptions{})
	case 3:
		err = l.r.client.Lock(ctx, []string{l.cur.Metadata.UID}, owner)
	case 4: // unconditional: the lock moved the resourceVersion on
		l.cur.Spec, l.cur.Status, l.cur.Metadata.ResourceVersion = spec, nil, ""
		out, err = l.r.client.Replace(ctx, flags, namespace, name, l.cur, client.WriteOptions{LockOwner: owner})
	case 5:
		err = l.r.client.Unlock(ctx, []string{l.cur.Metadata.UID}, owner)
	case 6:
		err = l.r.client.Delete(ctx, flags, namespace, name, client.WriteOptions{})
	}
	if err != nil {
		return fmt.Errorf("client %d write %d of %s via %s: %w", l.c, l.n, name, l.r.name, err)
	}
	if out != nil {
		if err := json.Unmarshal(out, &l.cur); err != nil {
			return fmt.Errorf("client %d: decode %s: %w", l.c, out, err)
		}
	}
	if l.n++; l.n == 7 {
		l.n, l.k = 0, l.k+1
	}
	return nil
}
