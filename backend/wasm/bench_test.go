package wasm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// BenchmarkGet compares a get through the example WASM controller, cold
// (module compiled and cached, so each call is instantiate + Go runtime
// start + run + collect) and warm (an instance held where it asks for its
// arguments, see warm.go), with reading the same file directly, with and
// without the YAML-to-JSON conversion the controller does. wasm/warm-heap
// is warm with wazero's own linear memory on the Go heap instead of
// memory_unix.go's, for comparison in the same run.
//
// Each wasm call is timed alone, after the pool has refilled (latency,
// not throughput): ns/op is the mean; p50-ms and p99-ms are the median and
// the 99th percentile (the worst call under 100 calls); MB/call and
// GCs/call count what the host's heap took per call including the
// replacement instance started after it, timer stopped or not.
func BenchmarkGet(b *testing.B) {
	m := modules(b)
	ctl := load(b, newRuntime(b, Options{WarmInstances: -1}), "yaml-tree", m.example)
	warm := load(b, newRuntime(b, Options{}), "yaml-tree", m.example)
	heapRuntime := newRuntime(b, Options{})
	heapRuntime.alloc = nil
	warmHeap := load(b, heapRuntime, "yaml-tree", m.example)
	ctx := context.Background()
	root := b.TempDir()
	if err := ctl.Put(ctx, root, widget, resource("team-a", "blue", map[string]string{"tier": "web"})); err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(root, "team-a", "widget.example.com", "blue.yaml")

	all := []*Controller{ctl, warm, warmHeap}
	for _, c := range all {
		if _, err := c.Get(ctx, root, widget, "team-a", "blue"); err != nil { // starts the pools
			b.Fatal(err)
		}
	}
	// refilled waits until every pool is full again, so that no warm-up
	// runs during a timed call (for cold calls too: the same pause).
	refilled := func() {
		for _, c := range all {
			for len(c.pool) < cap(c.pool) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	for _, tc := range []struct {
		name string
		ctl  *Controller
	}{{"wasm/cold", ctl}, {"wasm/warm", warm}, {"wasm/warm-heap", warmHeap}} {
		b.Run(tc.name, func(b *testing.B) {
			var times []time.Duration
			var before, after runtime.MemStats
			refilled()
			runtime.ReadMemStats(&before)
			for b.Loop() {
				start := time.Now()
				if _, err := tc.ctl.Get(ctx, root, widget, "team-a", "blue"); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				b.StopTimer()
				refilled()
				b.StartTimer()
			}
			runtime.ReadMemStats(&after)
			n := float64(len(times))
			slices.Sort(times)
			at := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Microseconds()) / 1e3 }
			b.ReportMetric(at(0.5), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n/1e6, "MB/call")
			b.ReportMetric(float64(after.NumGC-before.NumGC)/n, "GCs/call")
		})
	}
	b.Run("direct/read", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile(file); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct/read+yaml", func(b *testing.B) {
		for b.Loop() {
			data, err := os.ReadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := yaml.YAMLToJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoadCold is what the cache saves: compiling the example module
// in a fresh runtime with an empty in-memory compilation cache.
func BenchmarkLoadCold(b *testing.B) {
	m := modules(b)
	for b.Loop() {
		r, err := NewRuntime(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Load(context.Background(), "yaml-tree", m.example); err != nil {
			b.Fatal(err)
		}
		if err := r.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
