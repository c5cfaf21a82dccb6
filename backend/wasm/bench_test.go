package wasm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// BenchmarkGet compares a get through the example WASM controller, cold
// (module compiled and cached, so each call is instantiate + Go runtime
// start + run + collect) and warm (an instance held where it asks for its
// arguments, see warm.go), with reading the same file directly, with and
// without the YAML-to-JSON conversion the controller does.
func BenchmarkGet(b *testing.B) {
	m := modules(b)
	ctl := load(b, newRuntime(b, Options{WarmInstances: -1}), "yaml-tree", m.example)
	warm := load(b, newRuntime(b, Options{}), "yaml-tree", m.example)
	ctx := context.Background()
	root := b.TempDir()
	if err := ctl.Put(ctx, root, widget, resource("team-a", "blue", map[string]string{"tier": "web"})); err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(root, "team-a", "widget.example.com", "blue.yaml")

	for _, c := range []*Controller{ctl, warm} {
		if _, err := c.Get(ctx, root, widget, "team-a", "blue"); err != nil { // starts warm's pool
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		ctl  *Controller
	}{{"wasm/cold", ctl}, {"wasm/warm", warm}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.ctl.Get(ctx, root, widget, "team-a", "blue"); err != nil {
					b.Fatal(err)
				}
				// Latency, not throughput: the next call comes when the
				// pool is full again (for cold calls, after the same pause).
				b.StopTimer()
				for len(warm.pool) < cap(warm.pool) {
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
			}
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
