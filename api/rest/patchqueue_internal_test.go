package rest

import (
	"testing"
	"time"
)

// TestPatchQueue: a second patch of an object waits for the first to end
// its turn; a patch of another object does not; the queue forgets an
// object nobody waits for, and ending a turn twice ends it once.
func TestPatchQueue(t *testing.T) {
	var q patchQueue
	a, b := patchKey{"p", "ns", "a"}, patchKey{"p", "ns", "b"}
	done := q.wait(a)
	q.wait(b)() // another object: no wait

	next := make(chan func())
	go func() { next <- q.wait(a) }()
	select {
	case <-next:
		t.Fatal("a second patch of the object went ahead while the first held its turn")
	case <-time.After(20 * time.Millisecond):
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
