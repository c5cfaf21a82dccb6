//go:build pprof

package main

import (
	"net/http"
	_ "net/http/pprof" // profiles on CAIRN_PPROF_ADDR, only in binaries built with -tags pprof
	"os"
)

// Built with -tags pprof, cairn serves net/http/pprof on $CAIRN_PPROF_ADDR
// (e.g. 127.0.0.1:6060), apart from the API and its access guard, so a
// server under load can be profiled (docs/performance.md).
func init() {
	if addr := os.Getenv("CAIRN_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
