package hub

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
)

// BenchmarkUpdateFromGuess updates a Flag read two ways alternately in one
// loop, as a REST PATCH does: "read" reads it consistently first
// (GetInstanceByName: the store's position, the read cache brought up to
// it), "guess" takes the read cache's object as it is
// (GuessInstanceByName); both updates are conditional on what was read.
func BenchmarkUpdateFromGuess(b *testing.B) {
	ctx, h, ref := benchFlag(b)
	n := 0
	update := func(guess bool) time.Duration {
		n++
		t0 := time.Now()
		var cur cairn.Instance
		if guess {
			var ok bool
			if cur, ok = h.GuessInstanceByName(ref.Path, "default", "f"); !ok {
				b.Fatal("no guess")
			}
		} else {
			var err error
			if cur, err = h.GetInstanceByName(ctx, ref.Path, "default", "f", true); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := h.UpdateInstances(ctx, []UpdateInstance{{ID: cur.ID, IfSeq: cur.Seq, Current: &cur,
			Value: json.RawMessage(fmt.Sprintf(`{"enabled":true,"description":"%d"}`, n))}}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	alternate(b, nil, "read", func() time.Duration { return update(false) }, "guess", func() time.Duration { return update(true) })
}
