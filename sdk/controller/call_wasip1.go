//go:build wasip1

package controller

import (
	"os"
	"strings"
	"unsafe"
)

// A host may start a module ahead of its call (cairn does; see
// backend/wasm): it answers the Go runtime's early reading of the arguments
// and environment with placeholders and holds the module here, where Main
// asks for them again, until a call comes. Exporting this function tells
// the host that the module asks again; it is never called. Under any other
// host (cup, wasmtime) asking again returns what the runtime read.
//
//go:wasmexport cairn_controller_v1
func askAgainMarker() {}

//go:wasmimport wasi_snapshot_preview1 args_sizes_get
func argsSizesGet(count, size *uint32) uint32

//go:wasmimport wasi_snapshot_preview1 args_get
func argsGet(ptrs, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
func environSizesGet(count, size *uint32) uint32

//go:wasmimport wasi_snapshot_preview1 environ_get
func environGet(ptrs, buf unsafe.Pointer) uint32

// startedAhead reports whether the host started the module ahead of its
// call: such a host gives the runtime's start-up placeholders, the
// module's name and nothing else, while a call always has an operation
// and a kind.
func startedAhead() bool { return len(os.Args) < 2 }

// callArgs asks the host for the call's arguments and environment and makes
// os.Args and os.Getenv return them, for authors who read those directly.
func callArgs() {
	if args, ok := readValues(argsSizesGet, argsGet); ok {
		os.Args = args
	}
	if env, ok := readValues(environSizesGet, environGet); ok {
		os.Clearenv()
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				os.Setenv(k, v)
			}
		}
	}
}

func readValues(sizes func(*uint32, *uint32) uint32, get func(unsafe.Pointer, unsafe.Pointer) uint32) ([]string, bool) {
	var count, size uint32
	if sizes(&count, &size) != 0 {
		return nil, false
	}
	if count == 0 {
		return []string{}, true
	}
	ptrs := make([]uint32, count)
	buf := make([]byte, size)
	if get(unsafe.Pointer(&ptrs[0]), unsafe.Pointer(&buf[0])) != 0 {
		return nil, false
	}
	base := uint32(uintptr(unsafe.Pointer(&buf[0])))
	vals := make([]string, count)
	for i, p := range ptrs {
		start := p - base
		end := start
		for end < size && buf[end] != 0 {
			end++
		}
		vals[i] = string(buf[start:end])
	}
	return vals, true
}
