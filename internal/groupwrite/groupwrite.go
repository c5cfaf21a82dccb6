// Package groupwrite writes the lines of many writers to one io.Writer in
// groups: Write hands its bytes to a goroutine that writes whatever has
// gathered in one call, so a busy server pays one write to the file per
// group instead of one per line (group commit), which is what a
// per-request audit line costs on a loaded machine. An idle writer's line
// is written at once; Flush waits for everything handed over.
package groupwrite

import (
	"io"
	"runtime"
	"sync"
)

// maxPending bounds the bytes waiting to be written; past it, Write waits.
const maxPending = 1 << 20

// coalesce is the group size below which the writer yields once before
// writing, so that lines being written at the same moment join the group.
const coalesce = 16 << 10

// Writer is safe for concurrent use. Each Write keeps its bytes together
// (a line is never split between groups) and bytes keep arrival order.
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	changed *sync.Cond // signalled when a group has been written
	writing bool       // a goroutine is draining pending
	pending []byte
	spare   []byte
	err     error // of a write no caller has seen yet
}

// New returns a Writer over w; w is called by one goroutine at a time.
func New(w io.Writer) *Writer {
	g := &Writer{w: w}
	g.changed = sync.NewCond(&g.mu)
	return g
}

// Write hands p over to be written and returns; an error of an earlier
// group is returned to the next Write or Flush.
func (g *Writer) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.pending) > 0 && len(g.pending)+len(p) > maxPending {
		g.changed.Wait()
	}
	g.pending = append(g.pending, p...)
	if !g.writing {
		g.writing = true
		go g.drain()
	}
	err := g.err
	g.err = nil
	return len(p), err
}

// drain writes what has gathered, group by group, until nothing has.
func (g *Writer) drain() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.pending) > 0 {
		if len(g.pending) < coalesce {
			// Let the goroutines that are ready run first: on a busy
			// server they are the requests whose lines would otherwise
			// each start a group of their own. Idle, it returns at once.
			g.mu.Unlock()
			runtime.Gosched()
			g.mu.Lock()
		}
		batch := g.pending
		g.pending = g.spare[:0]
		g.mu.Unlock()
		_, err := g.w.Write(batch)
		g.mu.Lock()
		if err != nil && g.err == nil {
			g.err = err
		}
		if cap(batch) <= maxPending {
			g.spare = batch[:0]
		}
		g.changed.Broadcast()
	}
	g.writing = false
	g.changed.Broadcast()
}

// Flush waits until every byte handed to Write has been written, and
// returns an error no Write has returned yet.
func (g *Writer) Flush() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.writing {
		g.changed.Wait()
	}
	err := g.err
	g.err = nil
	return err
}
