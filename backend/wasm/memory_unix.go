//go:build unix

package wasm

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// Linear memory outside the Go heap.
//
// By default wazero backs an instance's linear memory with a Go byte slice
// and copies it into a larger one on every memory.grow. A Go module grows
// its memory a few times while its runtime starts, so every instance left
// ~15 MB of garbage behind and the host's garbage collector ran every
// three calls or so. A collection has to stop the world, and that waits
// for every goroutine running a module to come out of compiled code (it
// cannot be preempted there), so a collection stalls the whole process for
// as long as a module computes without calling the host.
//
// mmapAllocator instead reserves each instance's whole memory limit as
// address space that cannot be touched (PROT_NONE: no memory, no commit
// charge) and makes it readable and writable as the module grows, in
// place: nothing is copied and nothing is left to the collector. A freed
// reservation is kept for the next instance (up to keep of them) rather
// than unmapped, because fresh pages from the system made calls slower
// (first-touch faults, and pages that start out of the CPU's caches);
// before it is used again, everything the previous instance could write
// is zeroed, so an instance starts from nothing another instance left.
// TestNoStateLeaksBetweenCalls fails if that zeroing is left out.
type mmapAllocator struct {
	keep int

	mu     sync.Mutex
	free   []*mmapMemory // freed reservations, to be zeroed when reused
	closed bool
}

func memoryAllocator(keep int) experimental.MemoryAllocator {
	return &mmapAllocator{keep: keep}
}

// pageFault is the smallest system page size Go runs on.
const pageFault = 4 << 10

func (a *mmapAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	if max == 0 || uint64(int(max)) != max {
		return &heapMemory{max: max}
	}
	a.mu.Lock()
	var m *mmapMemory
	for i := len(a.free) - 1; i >= 0; i-- {
		if uint64(len(a.free[i].buf)) == max {
			m = a.free[i]
			a.free = append(a.free[:i], a.free[i+1:]...)
			break
		}
	}
	a.mu.Unlock()
	if m != nil {
		clear(m.buf[:m.committed])
		return m
	}
	buf, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		// No address space to reserve (a strict ulimit -v, say): the
		// module still runs, on the Go heap.
		return &heapMemory{max: max}
	}
	return &mmapMemory{a: a, buf: buf}
}

// release keeps m for the next instance, or unmaps it.
func (a *mmapAllocator) release(m *mmapMemory) {
	a.mu.Lock()
	if !a.closed && len(a.free) < a.keep {
		a.free = append(a.free, m)
		m = nil
	}
	a.mu.Unlock()
	if m != nil {
		// Unmapping takes a while (the pages go back to the system and
		// other threads' TLBs are flushed), and wazero frees an instance's
		// memory in proc_exit, within the call: not on the call's time.
		go unix.Munmap(m.buf) //nolint:errcheck // nothing to do about a failure
	}
}

// mmapMemory is one instance's reservation; its first committed bytes are
// readable and writable.
type mmapMemory struct {
	a         *mmapAllocator
	buf       []byte
	committed int
}

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	if n := int(size); n > m.committed {
		// Wasm pages are 64 KiB, a multiple of every system page size
		// Go supports, so the range is page-aligned.
		if err := unix.Mprotect(m.buf[m.committed:n], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil // memory.grow fails; the module sees it is out of memory
		}
		// Fault the pages in now, mostly while the instance warms up,
		// rather than one by one in the middle of a call.
		for i := m.committed; i < n; i += pageFault {
			m.buf[i] = 0
		}
		m.committed = n
	}
	return m.buf[:size:size]
}

func (m *mmapMemory) Free() { m.a.release(m) }

// close unmaps the reservations kept for later instances; the Runtime
// calls it when every instance is closed.
func (a *mmapAllocator) close() {
	a.mu.Lock()
	free := a.free
	a.free, a.closed = nil, true
	a.mu.Unlock()
	for _, m := range free {
		_ = unix.Munmap(m.buf)
	}
}
