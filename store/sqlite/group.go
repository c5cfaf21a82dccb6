package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// maxGroup caps how many concurrent Updates share one SQLite transaction,
// which bounds how long a write waits behind others of its group.
const maxGroup = 64

// gatherWait bounds how long a writer that finds the writer idle waits for
// others when the last transaction held several writes (gather).
const gatherWait = 200 * time.Microsecond

// committer batches concurrent Updates into one SQLite transaction (group
// commit). There is one writer connection, so writers queue anyway; while
// one transaction runs, the writers that arrive queue up, and the next of
// them runs all the queued writes in one transaction, each inside its own
// savepoint, and commits once. A write that fails rolls back to its
// savepoint, which undoes that write alone; every write is acknowledged only
// after the commit that holds it. A lone writer runs as before: its own
// transaction, no savepoint, no wait. Under load writes come in waves (a
// group commits, its clients send their next writes together), and the
// first of a wave finds the writer idle: it waits briefly for the rest of
// the wave (gather) instead of committing alone.
type committer struct {
	// max caps a group; 0 means maxGroup (1 turns grouping off: the
	// baseline of BenchmarkConcurrentCreates).
	max int
	// wait bounds gather's wait; 0 means gatherWait, negative turns
	// gathering off (the baseline of BenchmarkGather).
	wait  time.Duration
	mu    sync.Mutex
	busy  bool       // a transaction runs (its leader has not handed over yet)
	queue []*writeOp // arrived while busy, in arrival order
	// last is how many writes the last transaction held; gathering is
	// set, with wake (closed when the queue reaches want), while a writer
	// that found the writer idle waits for others (gather).
	last      int
	gathering bool
	want      int
	wake      chan struct{}
}

// gather is run by a writer that found the writer idle (busy is now set
// for it). When the last transaction held several writes, the writes are
// coming in waves (several clients at once), and this one is the first of
// the next wave: it waits, at most gatherWait, for as many as the last
// wave to queue, and returns the group of op and those that did; nil when
// op is to run alone. A writer whose predecessor ran alone (a lone client,
// writes one at a time) never waits.
func (s *Store) gather(op *writeOp) []*writeOp {
	c := &s.commit
	c.mu.Lock()
	want := c.last - 1
	if want < 1 || c.wait < 0 {
		c.mu.Unlock()
		return nil
	}
	wait := c.wait
	if wait == 0 {
		wait = gatherWait
	}
	wake := make(chan struct{})
	c.gathering, c.want, c.wake = true, want, wake
	c.mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-wake:
	case <-t.C:
	}
	t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gathering, c.wake = false, nil
	if len(c.queue) == 0 {
		c.last = 1
		return nil
	}
	limit := c.max
	if limit == 0 {
		limit = maxGroup
	}
	n := min(len(c.queue), limit-1)
	group := make([]*writeOp, 0, n+1)
	group = append(append(group, op), c.queue[:n]...)
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	c.last = len(group)
	return group
}

// writeOp is one caller's Update.
type writeOp struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx store.Tx) error
	err  error
	done chan struct{}
	// lead is set, with group, when this caller is to run group (itself
	// first) rather than wait for another to run it.
	lead  bool
	group []*writeOp
	// panicked carries a panic of fn to the caller's goroutine.
	panicked any
}

// update runs fn in a write transaction, alone or in a group.
func (s *Store) update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	c := &s.commit
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan struct{})}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		defer s.handOver() // also when fn panics
		group := s.gather(op)
		if group == nil {
			return s.updateAlone(ctx, fn)
		}
		op.lead, op.group = true, group
	} else {
		c.queue = append(c.queue, op)
		if c.gathering && len(c.queue) >= c.want {
			close(c.wake)
			c.gathering = false
		}
		c.mu.Unlock()
		<-op.done
		if op.lead {
			defer s.handOver()
		}
	}
	if op.lead {
		if s.runGroup(op.group) {
			// After the members are woken: a RESTART of the WAL
			// (checkpoint.go) delays only the writers after them.
			s.ckpt.committed(s.w)
		}
	}
	if op.panicked != nil {
		panic(op.panicked)
	}
	return op.err
}

// handOver passes the writer on: to the first of the writers that queued
// meanwhile, who runs them all as one group, or to nobody.
func (s *Store) handOver() {
	c := &s.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.busy = false
		return
	}
	limit := c.max
	if limit == 0 {
		limit = maxGroup
	}
	n := min(len(c.queue), limit)
	c.last = n
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	leader := group[0]
	leader.lead, leader.group = true, group
	close(leader.done)
}

// updateAlone runs fn in a transaction of its own. Like a write of a
// group, it is not run when its caller's context has ended, and once
// begun it runs to its end: the driver would otherwise watch a cancellable
// context with a goroutine of its own for every statement.
func (s *Store) updateAlone(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return classify(fmt.Errorf("sqlite: begin write transaction: %w", err))
	}
	done := false
	defer func() {
		if !done {
			sqlTx.Rollback() // fn panicked; the panic goes on
		}
	}()
	r := s.wr.inWriteTx(sqlTx)
	t := &tx{reader: r}
	if err := fn(ctx, t); err != nil {
		done = true
		if rbErr := sqlTx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) && !rolledBack(err) {
			return errors.Join(err, fmt.Errorf("sqlite: rollback: %w", rbErr))
		}
		return err
	}
	done = true
	if err := s.position.commit(ctx, sqlTx, r, t.after); err != nil {
		return classify(fmt.Errorf("sqlite: commit: %w", err))
	}
	s.ckpt.committed(s.w)
	return nil
}

// runGroup runs the writes of group in one transaction and sets each one's
// result; it wakes every member but the leader (group[0], the caller). It
// reports whether a transaction of several writes committed.
//
// The writes run first without savepoints (runPlain): a savepoint costs two
// statements and, for each page a write changes, a copy in the undo journal,
// and writes seldom fail. Should one fail, the transaction is rolled back and
// the others run again in another, each in a savepoint of its own
// (runSavepoints); the failed write's result stands, since it saw what it
// would have seen there: the writes before it and nothing else. Running a
// write twice is what the store.Store contract allows (fn has no effects
// outside tx: PostgreSQL retries it too).
func (s *Store) runGroup(group []*writeOp) (committed bool) {
	defer func() {
		for _, op := range group[1:] {
			close(op.done)
		}
	}()
	if len(group) == 1 {
		op := group[0]
		op.err, op.panicked = s.runAlone(op)
		return
	}
	committed, again, begun := s.runPlain(group)
	if again != nil {
		committed = s.runSavepoints(again, begun)
	}
	return committed
}

// runPlain runs the writes of group in one transaction without savepoints
// and commits it. When a write fails, it rolls the transaction back and
// returns the writes to run again (those that ran before it, the first
// begun of them, then those after it).
//
// The transaction belongs to no one caller: one caller's cancelled context
// must not roll back the others' writes (database/sql rolls a transaction
// back when its context ends, and an interrupted statement can end
// SQLite's transaction). A caller whose context has ended before its turn
// is not run; once it runs, its write completes.
func (s *Store) runPlain(group []*writeOp) (committed bool, again []*writeOp, begun int) {
	sqlTx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		err = classify(fmt.Errorf("sqlite: begin write transaction: %w", err))
		for _, op := range group {
			op.err = err
		}
		return false, nil, 0
	}
	shared := s.wr.inWriteTx(sqlTx)
	var (
		ran   []*writeOp // members whose writes the transaction holds
		after []func()   // their AfterCommit functions
	)
	for i, op := range group {
		if err := op.ctx.Err(); err != nil {
			op.err = err
			continue
		}
		t := &tx{reader: shared}
		op.err, op.panicked = call(context.WithoutCancel(op.ctx), op.fn, t)
		if op.err != nil || op.panicked != nil {
			_ = sqlTx.Rollback()
			return false, append(ran, group[i+1:]...), len(ran)
		}
		ran = append(ran, op)
		after = append(after, t.after...)
	}
	if len(ran) == 0 {
		_ = sqlTx.Rollback()
		return false, nil, 0
	}
	if err := s.position.commit(context.Background(), sqlTx, shared, after); err != nil {
		err = classify(fmt.Errorf("sqlite: commit: %w", err))
		for _, op := range ran {
			op.err = err
		}
		return false, nil, 0
	}
	return true, nil, 0
}

// runSavepoints runs the writes of group in one transaction, each in a
// savepoint of its own, so that a failed write is undone alone, and commits
// it. The first begun writes have begun already (runPlain ran them) and run
// whatever became of their contexts since.
func (s *Store) runSavepoints(group []*writeOp, begun int) (committed bool) {
	var (
		sqlTx  *sql.Tx
		shared reader
		ran    []*writeOp // members whose writes the transaction holds
		after  []func()   // their AfterCommit functions
	)
	fail := func(err error) {
		_ = sqlTx.Rollback()
		for _, op := range ran {
			op.err = err
		}
	}
	// One savepoint name serves every write: each is released or rolled
	// back before the next begins. The three statements are prepared once
	// (queries.go) instead of parsed per write.
	exec := func(q string) error { _, err := shared.exec(context.Background(), q); return err }
	for i, op := range group {
		if err := op.ctx.Err(); err != nil && i >= begun {
			op.err = err
			continue
		}
		ctx := context.WithoutCancel(op.ctx)
		if sqlTx == nil {
			// The first write of a transaction needs no savepoint
			// (whose undo journal takes a copy of every page the
			// write changes): should it fail, the transaction holds
			// nothing else and is rolled back whole, and the next
			// write begins another.
			var err error
			if sqlTx, err = s.w.BeginTx(context.Background(), nil); err != nil {
				err = classify(fmt.Errorf("sqlite: begin write transaction: %w", err))
				for _, op := range group[i:] {
					op.err = err
				}
				return
			}
			shared = s.wr.inWriteTx(sqlTx)
			t := &tx{reader: shared}
			op.err, op.panicked = call(ctx, op.fn, t)
			if op.err == nil && op.panicked == nil {
				ran = append(ran, op)
				after = append(after, t.after...)
			} else {
				_ = sqlTx.Rollback()
				sqlTx = nil
			}
			continue
		}
		if err := exec(qSavepoint); err != nil {
			op.err = classify(fmt.Errorf("sqlite: savepoint: %w", err))
			fail(op.err)
			s.failRest(group[i+1:], op.err)
			return
		}
		t := &tx{reader: shared}
		op.err, op.panicked = call(ctx, op.fn, t)
		if op.err == nil && op.panicked == nil {
			if err := exec(qRelease); err != nil {
				op.err = classify(fmt.Errorf("sqlite: release savepoint: %w", err))
				fail(op.err)
				s.failRest(group[i+1:], op.err)
				return
			}
			ran = append(ran, op)
			after = append(after, t.after...)
			continue
		}
		// Undo this write alone. Should that fail, SQLite has ended the
		// transaction itself (an I/O error, say): the writes before this
		// one are gone too and are reported failed, never acknowledged.
		// What the transaction knew may have come from the write undone.
		shared.known.forget()
		err := exec(qRollbackTo)
		if err == nil {
			err = exec(qRelease)
		}
		if err != nil {
			err = classify(fmt.Errorf("sqlite: the write transaction ended with a failed write of its group: %w", err))
			fail(err)
			s.failRest(group[i+1:], err)
			return
		}
	}
	if sqlTx == nil { // no write of the group succeeded
		return
	}
	if err := s.position.commit(context.Background(), sqlTx, shared, after); err != nil {
		err = classify(fmt.Errorf("sqlite: commit: %w", err))
		for _, op := range ran {
			op.err = err
		}
		return
	}
	return true
}

// failRest sets err on the members of a group that did not get to run.
func (s *Store) failRest(rest []*writeOp, err error) {
	for _, op := range rest {
		op.err = &cairn.Error{Code: cairn.CodeUnavailable, Msg: "sqlite: not written: " + err.Error(), Err: err}
	}
}

// runAlone runs a group of one as a transaction of its own, catching a
// panic of its fn for the caller.
func (s *Store) runAlone(op *writeOp) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return s.updateAlone(op.ctx, op.fn), nil
}

// call runs fn, turning a panic into a value for its caller's goroutine.
func call(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error, t *tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(ctx, t), nil
}
