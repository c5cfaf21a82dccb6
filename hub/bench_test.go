package hub_test

import (
	"testing"

	"github.com/cairn-dev/cairn/hub/hubbench"
	"github.com/cairn-dev/cairn/store"
)

// The hub's core benchmarks on SQLite; the same run on PostgreSQL in
// store/postgres (BenchmarkHub).

func sqliteBench() hubbench.Opener {
	return hubbench.Opener{Kind: "sqlite", Open: func(b *testing.B) store.Store { return openStore(b, "bench.db") }}
}

func BenchmarkCreate(b *testing.B)          { hubbench.Create(b, sqliteBench()) }
func BenchmarkCreateBatch1000(b *testing.B) { hubbench.CreateBatch1000(b, sqliteBench()) }
func BenchmarkGetWithValue(b *testing.B)    { hubbench.GetWithValue(b, sqliteBench()) }
func BenchmarkList1000(b *testing.B)        { hubbench.List1000(b, sqliteBench()) }
func BenchmarkUpdate(b *testing.B)          { hubbench.Update(b, sqliteBench()) }
func BenchmarkLockUnlock(b *testing.B)      { hubbench.LockUnlock(b, sqliteBench()) }
