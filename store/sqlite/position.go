package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"sync"
)

// walHeaderSize is the two copies of SQLite's WAL-index header at the
// start of the -shm file (https://www.sqlite.org/walformat.html, "The
// WAL-Index Header"): iVersion, unused, iChange (incremented by every
// write transaction), isInit, bigEndCksum, szPage, mxFrame (the last
// committed frame), nPage, frame checksum, salts and header checksum, 48
// bytes each. A commit is published by rewriting the header (the second
// copy, then the first); readers of the database find their snapshot
// through it. So while it reads the same, nobody (this process or
// another) has committed anything.
const walHeaderSize = 96

// positionCache answers LastSeq without a query while the WAL-index
// header is unchanged since the last query: a read of 96 bytes from the
// shared-memory file instead of a read transaction. It falls back to the
// query whenever the header cannot be read or is being rewritten.
type positionCache struct {
	shmPath string

	mu     sync.Mutex
	shm    *os.File // nil until opened; closed by Store.Close
	failed bool     // no -shm file to read (not in WAL mode): always query
	hdr    [walHeaderSize]byte
	seq    int64
	valid  bool
	// unpublished: commit keeps nothing (the baseline of
	// BenchmarkPositionAfterCommit).
	unpublished bool
}

// header reads the WAL-index header; ok is false when it cannot be read
// or its two copies differ (a commit is publishing it).
func (p *positionCache) header() (hdr [walHeaderSize]byte, ok bool) {
	p.mu.Lock()
	if p.shm == nil && !p.failed {
		f, err := os.Open(p.shmPath)
		if err != nil {
			p.failed = true
		}
		p.shm = f
	}
	f := p.shm
	p.mu.Unlock()
	if f == nil {
		return hdr, false
	}
	if n, err := f.ReadAt(hdr[:], 0); err != nil || n != walHeaderSize {
		return hdr, false
	}
	// isInit (byte 12) set, and both copies alike.
	if hdr[12] == 0 || !bytes.Equal(hdr[:48], hdr[48:]) {
		return hdr, false
	}
	return hdr, true
}

func (p *positionCache) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shm != nil {
		p.shm.Close()
		p.shm = nil
	}
	p.failed = true
}

// lastSeq returns the position query's answer, or the last one when the
// header read before it is still there.
func (p *positionCache) lastSeq(ctx context.Context, query func(context.Context) (int64, error)) (int64, error) {
	hdr, ok := p.header()
	if ok {
		p.mu.Lock()
		if p.valid && p.hdr == hdr {
			seq := p.seq
			p.mu.Unlock()
			return seq, nil
		}
		p.mu.Unlock()
	}
	// The header was read before the query: the answer covers every
	// commit it shows, so it stands for as long as the header reads the
	// same.
	seq, err := query(ctx)
	if err != nil || !ok {
		return seq, err
	}
	p.mu.Lock()
	if !p.valid || p.hdr != hdr || seq > p.seq {
		p.hdr, p.seq, p.valid = hdr, seq, true
	}
	p.mu.Unlock()
	return seq, nil
}

// iChange is the WAL-index header's count of header writes: one per
// commit, one more when a writer restarts the WAL.
func iChange(hdr *[walHeaderSize]byte) uint32 { return binary.NativeEndian.Uint32(hdr[8:12]) }

// commit commits the writer's transaction tx (r reads through it) and
// keeps the position it committed for LastSeq, so that the reads after a
// commit under write load do not each query it: the header is read
// before the commit, while tx holds the write lock (nobody else can
// commit), and again after it; when exactly one header write lies between
// the two (iChange one up: this commit, no other process's nor a restart
// of the WAL), the header after is this commit's, and the change log's
// position is tx's last change.
//
// The functions of hooks run right after the commit, before the position
// is kept.
func (p *positionCache) commit(ctx context.Context, tx *sql.Tx, r reader, hooks []func()) error {
	if p.unpublished {
		if err := tx.Commit(); err != nil {
			return err
		}
		runAll(hooks)
		return nil
	}
	before, ok := p.header()
	var seq int64
	if ok {
		var err error
		if seq, err = r.LastSeq(ctx); err != nil {
			ok = false
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	runAll(hooks)
	if !ok {
		return nil
	}
	after, ok := p.header()
	if !ok || iChange(&after) != iChange(&before)+1 {
		return nil
	}
	p.mu.Lock()
	p.hdr, p.seq, p.valid = after, seq, true
	p.mu.Unlock()
	return nil
}

func runAll(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}
