package hub

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkUpdateValueCheck updates a Flag from the read cache's object,
// as a REST PATCH does, checking its value two ways alternately in one
// loop: "store" as every update did before (checkValue: the Type read from
// the store, nothing pinned; what a store without store.TypeMatcher still
// does), "kept" as an update does now (the kept Type, pinned in the
// transaction by TypeMatches). It reports the process's CPU time (user +
// system) per update of each, steadier than wall time with SQLite's syncs.
func BenchmarkUpdateValueCheck(b *testing.B) {
	ctx, h, ref := benchFlag(b)
	if _, err := h.GetInstanceByName(ctx, ref.Path, "default", "f", true); err != nil { // loads the read cache
		b.Fatal(err)
	}
	n := 0
	update := func(kept bool) time.Duration {
		n++
		cur, ok := h.GuessInstanceByName(ref.Path, "default", "f")
		if !ok {
			b.Fatal("no guess")
		}
		state := int32(-1) // the store's Type read, as on a store without TypeMatcher
		if kept {
			state = 1
		}
		h.typesMatch.Store(state)
		t0 := cpuTime(b)
		if _, err := h.UpdateInstances(ctx, []UpdateInstance{{ID: cur.ID, IfSeq: cur.Seq, Current: &cur,
			Value: json.RawMessage(fmt.Sprintf(`{"enabled":true,"description":"%d"}`, n))}}); err != nil {
			b.Fatal(err)
		}
		return cpuTime(b) - t0
	}
	alternate(b, nil, "store", func() time.Duration { return update(false) }, "kept", func() time.Duration { return update(true) })
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
