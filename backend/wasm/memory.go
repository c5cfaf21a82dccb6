package wasm

// heapMemory is linear memory on the Go heap, as wazero keeps it by
// default: the fallback when address space cannot be reserved.
type heapMemory struct {
	buf []byte
	max uint64
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		buf := make([]byte, size, max(size, 2*uint64(cap(m.buf))))
		copy(buf, m.buf)
		m.buf = buf
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *heapMemory) Free() { m.buf = nil }
