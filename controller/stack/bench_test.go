package stack_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cairn-dev/cairn/hub"
)

// benchEnv installs n installations of the test stack testdata/db and
// reconciles each once.
func benchEnv(b *testing.B, n int) (*env, []string) {
	b.Helper()
	e := newEnv(b)
	entry := e.addStack("testdata/db")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.install(entry, fmt.Sprintf("inst-%04d", i), nil, `{"engine":"mysql"}`).ID
	}
	for _, id := range ids {
		e.reconcile(id)
	}
	return e, ids
}

// BenchmarkReconcileIdle reconciles 100 installations with nothing to
// change (one op = 100 reconciles), side by side with the baseline of only
// reading what a reconcile must read (each installation, its children and
// their values): the ratio is what rendering and comparing cost on top.
func BenchmarkReconcileIdle(b *testing.B) {
	e, ids := benchEnv(b, 100)
	before, _ := e.h.LastSeq(e.ctx)
	b.Run("reads-only", func(b *testing.B) {
		for b.Loop() {
			for _, id := range ids {
				inst, err := e.h.GetInstance(e.ctx, id, true)
				if err != nil {
					b.Fatal(err)
				}
				kids, err := e.h.GetInstances(e.ctx, inst.Uses)
				if err != nil {
					b.Fatal(err)
				}
				refs := make([]hub.ValueRef, len(kids))
				for i, k := range kids {
					refs[i] = hub.ValueRef{Instance: k, Version: k.Latest}
				}
				if _, err := e.h.Values(e.ctx, refs); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("reconcile", func(b *testing.B) {
		for b.Loop() {
			for _, id := range ids {
				if _, err := e.c.Reconcile(e.ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	if after, _ := e.h.LastSeq(e.ctx); after != before {
		b.Fatalf("idle reconciles wrote %d changes", after-before)
	}
}

// BenchmarkMemory1000 reports the heap the controller keeps for 1,000
// installations (two children each) after reconciling them all, per
// installation, beside the heap of the same process with none: the
// controller's own state (the child-to-installation index and the parsed
// stack) is what grows with installations.
func BenchmarkMemory1000(b *testing.B) {
	for b.Loop() {
		base := heap()
		e, ids := benchEnv(b, 1000)
		withAll := heap()
		b.ReportMetric(float64(withAll-base)/float64(len(ids)), "B/installation")
		b.ReportMetric(float64(withAll)/(1<<20), "MiB-heap")
		runtime.KeepAlive(e)
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
