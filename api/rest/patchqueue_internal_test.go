package rest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPatchQueue: a second patch of an object waits for the first to end
// its turn; a patch of another object does not; a waiter whose context
// ends leaves without a turn; the queue forgets an object nobody waits
// for, and ending a turn twice ends it once.
func TestPatchQueue(t *testing.T) {
	ctx := context.Background()
	var q patchQueue
	wait := func(ctx context.Context, key patchKey) func() {
		t.Helper()
		done, err := q.wait(ctx, key)
		if err != nil {
			t.Fatalf("wait for %v: %v", key, err)
		}
		return done
	}
	a, b := patchKey{"p", "ns", "a"}, patchKey{"p", "ns", "b"}
	done := wait(ctx, a)
	wait(ctx, b)() // another object: no wait

	gone, cancel := context.WithCancel(ctx)
	left := make(chan error)
	go func() {
		_, err := q.wait(gone, a)
		left <- err
	}()
	next := make(chan func())
	go func() { next <- wait(ctx, a) }()
	select {
	case <-next:
		t.Fatal("a second patch of the object went ahead while the first held its turn")
	case err := <-left:
		t.Fatalf("a waiter left before its context ended: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter whose context ended got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter whose context ended kept waiting")
	}
	done()
	done() // a second call ends nothing more
	var done2 func()
	select {
	case done2 = <-next:
	case <-time.After(5 * time.Second):
		t.Fatal("the second patch did not get its turn after the first ended")
	}
	done2()
	q.mu.Lock()
	n := len(q.m)
	q.mu.Unlock()
	if n != 0 {
		t.Fatalf("the queue keeps %d objects nobody waits for", n)
	}
}
