package wasm

import "testing"

// The Go-heap fallback grows by copying, keeps what was written, and
// stops at its maximum.
func TestHeapMemory(t *testing.T) {
	m := &heapMemory{max: 4 * pageSize}
	copy(m.Reallocate(pageSize), "kept")
	if b := m.Reallocate(3 * pageSize); len(b) != 3*pageSize || string(b[:4]) != "kept" {
		t.Fatalf("grown to %d bytes starting %q", len(b), b[:4])
	}
	if b := m.Reallocate(5 * pageSize); b != nil {
		t.Fatalf("grew past the maximum to %d bytes", len(b))
	}
}
