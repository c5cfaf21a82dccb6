package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn runs an Update's transaction on one pooled connection with fewer
// round trips than pgx.Tx. Statements whose answer nobody waits for are
// held back and sent in the same batch as the next statement that is
// waited for: BEGIN, and writes whose only answer is an error (deferred).
// The change notification (notify.go) goes out in the same batch as
// COMMIT. A transaction that runs no statement sends neither BEGIN nor
// ROLLBACK.
//
// Order is kept: held statements run before the statement they are sent
// with, in the order they were queued. In a batch PostgreSQL skips every
// statement after a failed one up to the batch's end, so a statement
// never runs outside the transaction when BEGIN fails. A held statement
// that fails makes every later call fail with its error, and the
// transaction never commits.
type txConn struct {
	c        *pgxpool.Conn
	held     []heldStmt
	sent     bool  // BEGIN has gone out
	failed   error // a held statement's failure
	deferred bool  // something besides BEGIN is held
	// locked are the instances this transaction holds a row lock of
	// (read locked, created or given a version), which therefore exist
	// until it ends unless it deletes them: writes to them are held back.
	locked map[string]bool
}

// heldStmt is a statement held back, and what its result must be.
type heldStmt struct {
	sql   string
	args  []any
	check func(pgconn.CommandTag, error) error
}

const (
	qBegin    = `BEGIN ISOLATION LEVEL READ COMMITTED`
	qCommit   = `COMMIT`
	qRollback = `ROLLBACK`
)

func newTxConn(c *pgxpool.Conn) *txConn {
	return &txConn{c: c, locked: map[string]bool{}, held: []heldStmt{{sql: qBegin, check: func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("postgres: begin transaction: %w", classify(err))
		}
		return nil
	}}}}
}

// hold queues a statement to go out with the next one that is waited for
// (or before the commit); check turns its result into the error the call
// that queued it would have returned.
func (t *txConn) hold(sql string, args []any, check func(pgconn.CommandTag, error) error) {
	t.held = append(t.held, heldStmt{sql: sql, args: args, check: check})
	t.deferred = true
}

func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(t.held) == 0 && t.failed == nil {
		return t.c.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(t.held) == 0 && t.failed == nil {
		return t.c.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(t.held) == 0 && t.failed == nil {
		return t.c.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	return batchRow{row: br.QueryRow(), br: br}
}

// SendBatch sends b, led by the statements held back; the results
// returned are b's own.
func (t *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.failed != nil {
		return failedBatch{err: t.failed}
	}
	if len(t.held) == 0 {
		return t.c.SendBatch(ctx, b)
	}
	held := t.held
	t.held, t.deferred, t.sent = nil, false, true
	nb := &pgx.Batch{}
	for _, h := range held {
		nb.Queue(h.sql, h.args...)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := t.c.SendBatch(ctx, nb)
	for _, h := range held {
		if err := h.check(br.Exec()); err != nil {
			br.Close()
			t.failed = err
			return failedBatch{BatchResults: br, err: err}
		}
	}
	return br
}

// flush sends what is held back, alone.
func (t *txConn) flush(ctx context.Context) error {
	return t.SendBatch(ctx, &pgx.Batch{}).Close()
}

// commit commits, sending the change notification first in the same batch
// when notify is set.
func (t *txConn) commit(ctx context.Context, notify bool, schema string) error {
	if t.deferred {
		// A held statement's failure may not be PostgreSQL's (no row
		// matched): it must be known before COMMIT is sent.
		if err := t.flush(ctx); err != nil {
			return err
		}
	}
	if t.failed != nil {
		return t.failed
	}
	if !t.sent {
		return nil // nothing ran, nothing to commit
	}
	b := &pgx.Batch{}
	if notify {
		b.Queue(qNotifyChanges, changesChannel, schema)
	}
	b.Queue(qCommit)
	br := t.c.SendBatch(ctx, b)
	if notify {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("postgres: notify the change: %w", classify(err))
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("postgres: commit: %w", classify(err))
	}
	if tag.String() == "ROLLBACK" {
		// COMMIT of a failed transaction rolls it back.
		return fmt.Errorf("postgres: commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// rollback ends the transaction, if it began, without committing.
func (t *txConn) rollback(ctx context.Context) error {
	if !t.sent {
		return nil
	}
	_, err := t.c.Exec(ctx, qRollback)
	return err
}

// release returns the connection to the pool; pgxpool closes it instead
// when a transaction is still open on it (a failed commit or rollback).
func (t *txConn) release() { t.c.Release() }

// batchRows closes the batch that carried a query once its rows are.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// batchRow is a QueryRow answer from a batch, closed after Scan.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// failedBatch answers every read of a batch that failed before the
// caller's statements (a held statement failed).
type failedBatch struct {
	pgx.BatchResults // the closed batch, for what is not overridden
	err              error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRow{f.err} }
func (f failedBatch) Close() error                     { return f.err }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
