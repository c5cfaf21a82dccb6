package git_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// BenchmarkCommitSerial: one writer, one commit and push per update, on a
// file:// remote.
func BenchmarkCommitSerial(b *testing.B) {
	r := gittest.NewRemote(b)
	bk := gittest.NewBackend(b, r.FileURL())
	ctx := b.Context()
	id := uuid.NewString()
	c := create(b, ctx, bk, id, "bench", `{"n":0}`)
	b.ResetTimer()
	for i := range b.N {
		out, err := bk.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: i + 2,
			NewValue: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1)), Context: c})
		if err != nil {
			b.Fatal(err)
		}
		c = out
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkCommitConcurrent: two backends with caches of their own (as two
// processes), each with concurrent writers creating resources on one
// remote; pushes race and retry.
func BenchmarkCommitConcurrent(b *testing.B) {
	r := gittest.NewRemote(b)
	backends := []*git.Backend{gittest.NewBackend(b, r.FileURL()), gittest.NewBackend(b, r.FileURL())}
	ctx := b.Context()
	var n atomic.Int64
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			bk := backends[i%2]
			name := fmt.Sprintf("c%d", i)
			mctx := cairn.WithResourceMeta(ctx, flagMeta(name, nil))
			if _, err := bk.OnCreate(mctx, cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(`{}`)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkGetValueWarm: reading a resource version already read once.
func BenchmarkGetValueWarm(b *testing.B) {
	r := gittest.NewRemote(b)
	bk := gittest.NewBackend(b, r.FileURL())
	ctx := b.Context()
	id := uuid.NewString()
	c := create(b, ctx, bk, id, "read", `{"enabled":true}`)
	req := cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1, Context: c}
	if _, err := bk.GetValue(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := bk.GetValue(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteTreeSize: one writer updating one resource in a
// repository already holding 10 or 1,000 resource files (seeded by one
// batch commit) on a file:// remote. A write's cost should not grow with
// the tree.
func BenchmarkWriteTreeSize(b *testing.B) {
	for _, files := range []int{10, 1000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			r := gittest.NewRemote(b)
			bk := gittest.NewBackend(b, r.FileURL())
			ctx := b.Context()
			writes := make([]cairn.BatchWrite, files)
			for i := range writes {
				m := flagMeta(fmt.Sprintf("seed%d", i), nil)
				writes[i] = cairn.BatchWrite{Meta: &m, Create: &cairn.OnCreateRequest{InstanceID: fmt.Sprintf("seed%d", i), Value: json.RawMessage(`{"enabled":true}`)}}
			}
			if _, err := bk.OnBatch(ctx, writes); err != nil {
				b.Fatal(err)
			}
			id := uuid.NewString()
			c := create(b, ctx, bk, id, "bench", `{"n":0}`)
			b.ResetTimer()
			for i := range b.N {
				out, err := bk.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: i + 2,
					NewValue: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1)), Context: c})
				if err != nil {
					b.Fatal(err)
				}
				c = out
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/write")
		})
	}
}
