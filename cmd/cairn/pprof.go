//go:build pprof

package main

import (
	"net/http"
	_ "net/http/pprof" // profiles on CAIRN_PPROF_ADDR, only in binaries built with -tags pprof
	"os"
	"runtime"
	"strconv"
)

// Built with -tags pprof, cairn serves net/http/pprof on $CAIRN_PPROF_ADDR
// (e.g. 127.0.0.1:6060), apart from the API and its access guard, so a
// server under load can be profiled (docs/performance.md).
func init() {
	// CAIRN_PPROF_BLOCK=N fills /debug/pprof/block (about one event
	// sampled per N ns spent blocked) and /debug/pprof/mutex (one
	// contention in N): where requests wait, which a CPU profile does not
	// show (for writes, the queue for SQLite's one writer).
	if n, err := strconv.Atoi(os.Getenv("CAIRN_PPROF_BLOCK")); err == nil && n > 0 {
		runtime.SetBlockProfileRate(n)
		runtime.SetMutexProfileFraction(n)
	}
	if addr := os.Getenv("CAIRN_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
