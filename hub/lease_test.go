package hub_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/hub"
)

func TestLease(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnv(t, func(c *hub.Config) { c.Now = clock })
	h, ctx := e.h, e.ctx
	acquire := func(holder string) bool {
		t.Helper()
		ok, err := h.AcquireLease(ctx, "l", holder, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !acquire("a") {
		t.Fatal("a could not take a free lease")
	}
	if acquire("b") {
		t.Fatal("b took a lease a holds")
	}
	advance(5 * time.Second)
	if !acquire("a") {
		t.Fatal("a could not renew")
	}
	advance(9 * time.Second)
	if acquire("b") {
		t.Fatal("b took the lease 9s after a renewed it (duration 10s)")
	}
	advance(2 * time.Second)
	if !acquire("b") {
		t.Fatal("b could not take the lease 11s after the last renewal")
	}
	if acquire("a") {
		t.Fatal("a took back a lease b holds")
	}
	if err := h.ReleaseLease(ctx, "l", "b"); err != nil {
		t.Fatal(err)
	}
	if !acquire("a") {
		t.Fatal("a could not take a released lease")
	}
	st, err := h.Lease(ctx, "l")
	if err != nil || st.Holder != "a" || st.LeaseDurationSeconds != 10 {
		t.Fatalf("Lease = %+v, %v", st, err)
	}

	// Racing for a free lease: exactly one wins.
	advance(time.Minute)
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for _, who := range []string{"c", "d", "e", "f", "g", "h", "i", "j"} {
		wg.Go(func() {
			if ok, err := h.AcquireLease(ctx, "l", who, 10*time.Second); err == nil && ok {
				wins <- who
			}
		})
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("winners of the race: %v, want exactly one", winners)
	}
}

// TestWatchLease: a watch of a lease reports once as soon as it watches
// (a release between the caller's last look at the lease and the watch
// would otherwise go unheard until the caller's next pass, while a restore
// already saw the lease free), then every change of that lease and no
// other's, and returns nil when its context ends.
func TestWatchLease(t *testing.T) {
	e := newEnv(t)
	h := e.h
	if ok, err := h.AcquireLease(e.ctx, "l", "a", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	calls := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- h.WatchLease(ctx, "l", func() { calls <- struct{}{} })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no call of the watch: %s", what)
		}
	}
	wait("when it starts watching")
	if ok, err := h.AcquireLease(e.ctx, "other", "a", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease(other) = %v, %v", ok, err)
	}
	if err := h.ReleaseLease(e.ctx, "l", "a"); err != nil {
		t.Fatal(err)
	}
	wait("the release")
	select {
	case <-calls:
		t.Fatal("the watch of l reported a change of lease other")
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchLease after its context ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchLease did not return when its context ended")
	}
}
