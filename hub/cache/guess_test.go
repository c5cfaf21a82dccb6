package cache_test

import (
	"context"
	"testing"
)

// TestGuess: a guess is the cached instance, or this process's last
// update of it when newer, with no read of the store's position: another
// process's write stays unseen until a consistent read, and a commit of
// this process not handed to the cache stops guesses until one.
func TestGuess(t *testing.T) {
	ctx := context.Background()
	f := newOwnFixture(t)
	guess := func(name string) (int64, string, bool) {
		t.Helper()
		g, ok := f.c.Guess("cap.type.a", "default", name, true)
		return g.Seq, string(g.Latest.Value), ok
	}
	if _, _, ok := guess("nope"); ok {
		t.Fatal("a guess of an instance the cache does not hold")
	}

	mine := f.update(t, f.mine, "x", "1")
	if seq, v, ok := guess("x"); !ok || seq != mine.Seq || v != `{"v":"1"}` {
		t.Fatalf("after an own update the guess of x is %d %s %v, want %d {\"v\":\"1\"}", seq, v, ok, mine.Seq)
	}
	g, _ := f.c.Guess("cap.type.a", "default", "x", false)
	if g.Labels["v"] != "1" || g.Latest.Value != nil || len(g.Uses) != len(f.byName["x"].Uses) || len(g.Uses) == 0 {
		t.Fatalf("guess of x without value: labels %v, value %s, uses %v; want the own update's labels, no value, the cached uses", g.Labels, g.Latest.Value, g.Uses)
	}

	other := f.update(t, f.other, "y", "other")
	if seq, _, _ := guess("y"); seq != f.byName["y"].Seq {
		t.Fatalf("the guess of y is at %d: want %d, as the cache held it (another process wrote %d unseen)", seq, f.byName["y"].Seq, other.Seq)
	}
	if err := f.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if seq, v, _ := guess("y"); seq != other.Seq || v != `{"v":"other"}` {
		t.Fatalf("after a consistent read the guess of y is %d %s, want the other process's %d", seq, v, other.Seq)
	}
	f.check(t, "x", "y")

	f.c.Unhanded()
	if _, _, ok := guess("x"); ok {
		t.Fatal("a guess while a commit of this process is not applied")
	}
	if err := f.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := guess("x"); !ok {
		t.Fatal("no guess after a consistent read applied every commit")
	}
}
