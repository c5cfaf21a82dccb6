//go:build unix

package wasm

import (
	"bytes"
	"testing"
	"unsafe"
)

// Linear memory grows in place up to its maximum, and a reservation kept
// for the next instance comes back zeroed.
func TestMmapMemory(t *testing.T) {
	const max = 1 << 20
	a := memoryAllocator(1).(*mmapAllocator)
	defer a.close()
	m := a.Allocate(0, max)
	if _, ok := m.(*mmapMemory); !ok {
		t.Fatalf("Allocate gave a %T, want an *mmapMemory", m)
	}
	buf := m.Reallocate(pageSize)
	if len(buf) != pageSize || !bytes.Equal(buf, make([]byte, pageSize)) {
		t.Fatalf("first page: %d bytes, zero: %v", len(buf), bytes.Equal(buf, make([]byte, pageSize)))
	}
	copy(buf, "instance one")
	grown := m.Reallocate(4 * pageSize)
	if len(grown) != 4*pageSize || unsafe.SliceData(grown) != unsafe.SliceData(buf) || string(grown[:12]) != "instance one" {
		t.Fatalf("grow moved or lost the memory: %d bytes, %q", len(grown), grown[:12])
	}
	grown[4*pageSize-1] = 1
	if b := m.Reallocate(max + pageSize); b != nil {
		t.Fatalf("grew past the maximum to %d bytes", len(b))
	}
	m.Free()

	again := a.Allocate(0, max)
	buf2 := again.Reallocate(4 * pageSize)
	if unsafe.SliceData(buf2) != unsafe.SliceData(buf) {
		t.Error("the freed reservation was not reused")
	}
	if !bytes.Equal(buf2, make([]byte, 4*pageSize)) {
		t.Fatal("a reused reservation still holds the previous instance's bytes")
	}
	other := a.Allocate(0, max) // none kept: a new reservation
	if b := other.Reallocate(pageSize); unsafe.SliceData(b) == unsafe.SliceData(buf) {
		t.Error("one reservation handed to two instances")
	}
	again.Free()
	other.Free() // over keep: unmapped
	if len(a.free) != 1 {
		t.Errorf("%d reservations kept, want 1", len(a.free))
	}
}
