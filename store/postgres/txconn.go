package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn runs an Update's transaction on one pooled connection with fewer
// round trips than pgx.Tx: BEGIN goes out in the same batch as the
// transaction's first statement, and the change notification (notify.go)
// in the same batch as COMMIT. A transaction that runs no statement sends
// neither BEGIN nor ROLLBACK.
//
// In a batch PostgreSQL skips every statement after a failed one up to the
// batch's end, so a statement never runs outside the transaction when
// BEGIN fails.
type txConn struct {
	c     *pgxpool.Conn
	begun bool
}

const (
	qBegin    = `BEGIN ISOLATION LEVEL READ COMMITTED`
	qCommit   = `COMMIT`
	qRollback = `ROLLBACK`
)

func (t *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
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
	if t.begun {
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
	if t.begun {
		return t.c.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	return batchRow{row: br.QueryRow(), br: br}
}

// SendBatch sends b, led by BEGIN when the transaction has not begun; the
// results returned are b's own.
func (t *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.c.SendBatch(ctx, b)
	}
	t.begun = true
	nb := &pgx.Batch{}
	nb.Queue(qBegin)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := t.c.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return failedBatch{BatchResults: br, err: fmt.Errorf("begin transaction: %w", err)}
	}
	return br
}

// commit commits, sending the change notification first in the same batch
// when notify is set.
func (t *txConn) commit(ctx context.Context, notify bool, schema string) error {
	if !t.begun {
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
	if !t.begun {
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

// failedBatch answers every read of a batch whose BEGIN failed.
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
