//go:build !unix

package wasm

import "github.com/tetratelabs/wazero/experimental"

// memoryAllocator is nil where mmap is not at hand: wazero keeps linear
// memory on the Go heap (see memory_unix.go for what that costs).
func memoryAllocator(int) experimental.MemoryAllocator { return nil }
