// Package groupwrite writes the lines of concurrent writers to one
// io.Writer together: while one Write is in the underlying writer, the
// bytes of the Writes that arrive meanwhile are gathered and written in
// one call when it returns (group commit). A serial writer pays one call
// per Write, as without it; a busy server pays one call per group instead
// of one per line, which is what a per-request audit or log line costs on
// a loaded machine.
package groupwrite

import (
	"io"
	"sync"
)

// maxPending bounds the bytes gathered while a write is under way; past
// it, writers wait for the write instead of growing the buffer.
const maxPending = 1 << 20

// Writer is safe for concurrent use. Each Write keeps its bytes together
// (a line is never split between groups) and groups keep arrival order.
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a group has been written
	writing bool
	pending []byte
	spare   []byte
	err     error // of a group written for other writers, for the next Write or Flush
}

// New returns a Writer over w. w is only ever called by one goroutine at
// a time.
func New(w io.Writer) *Writer {
	g := &Writer{w: w}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// Write writes p, or hands it to the Write in progress, which writes it
// with its own bytes before it returns. An error writing a group is
// returned to the writer that wrote it and to the next Write or Flush.
func (g *Writer) Write(p []byte) (int, error) {
	g.mu.Lock()
	for g.writing && len(g.pending)+len(p) > maxPending && len(g.pending) > 0 {
		g.idle.Wait()
	}
	if g.writing {
		g.pending = append(g.pending, p...)
		err := g.err
		g.err = nil
		g.mu.Unlock()
		return len(p), err
	}
	g.writing = true // pending is empty: a writer drains it before it stops
	g.mu.Unlock()

	_, err := g.w.Write(p)
	g.mu.Lock()
	for len(g.pending) > 0 {
		batch := g.pending
		g.pending = g.spare[:0]
		g.mu.Unlock()
		_, werr := g.w.Write(batch)
		g.mu.Lock()
		if werr != nil && err == nil {
			err = werr
			g.err = werr // the other writers' lines were in it
		}
		if cap(batch) <= maxPending {
			g.spare = batch[:0]
		}
		g.idle.Broadcast()
	}
	g.writing = false
	g.idle.Broadcast()
	g.mu.Unlock()
	return len(p), err
}

// Flush waits until every byte handed to Write has been written, and
// returns an error no Write has returned yet.
func (g *Writer) Flush() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.writing {
		g.idle.Wait()
	}
	err := g.err
	g.err = nil
	return err
}
