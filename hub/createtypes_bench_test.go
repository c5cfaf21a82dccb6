package hub

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkCreateValueCheck checks a Flag's value against its Type two
// ways alternately in one loop: "store" as every create did before
// (checkValue: the Type read from the store, its compiled schema looked up
// by the schema's hash), "kept" as a create does now (checkKeptValue:
// the Type the last create read; the transaction compares it with the one
// it pins, which it read before too).
func BenchmarkCreateValueCheck(b *testing.B) {
	ctx, h, ref := benchFlagType(b)
	value := json.RawMessage(`{"enabled":true}`)
	var storeT, keptT time.Duration
	n := 0
	for b.Loop() {
		for i := range 2 {
			t0 := time.Now()
			if (n+i)%2 == 0 {
				if err := h.checkValue(ctx, "s", ref, value); err != nil {
					b.Fatal(err)
				}
				storeT += time.Since(t0)
			} else {
				if _, err := h.checkKeptValue(ctx, "s", ref, value); err != nil {
					b.Fatal(err)
				}
				keptT += time.Since(t0)
			}
		}
		n++
	}
	b.ReportMetric(float64(storeT.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(keptT.Nanoseconds())/float64(n), "kept-ns/op")
	b.ReportMetric(float64(storeT)/float64(keptT), "store-per-kept")
}
