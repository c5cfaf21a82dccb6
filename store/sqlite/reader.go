package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// reader implements store.Reader on one connection pool, either directly
// (tx == nil: one-statement reads) or inside a transaction: the writer's
// in Update, a read-only snapshot in view.
type reader struct {
	db     *sql.DB
	tx     *sql.Tx
	shared map[string]*sql.Stmt // prepared at Open for db; never written after
	bound  *boundStmts          // shared statements bound to tx, on first use
	types  *typeDecodes         // shared by both pools' readers
	// known is what a write transaction learnt about itself (nil outside
	// one), shared by every write of a group.
	known *txKnown
}

// txKnown is what a write transaction knows without asking SQLite again:
// the Seq of the last change it logged, the Type checks that answered yes
// and instances that are there. SQLite has one writer, so nobody else changes either until the
// transaction ends; the transaction's own writes that could change them
// forget them (forget), as does undoing a write of a group (ROLLBACK TO),
// which may undo what was learnt.
type txKnown struct {
	// lastSeq is the Seq of the newest change the transaction logged; 0
	// when it logged none (or forgot): LastSeq asks SQLite then.
	lastSeq int64
	// matched are TypeMatches' yes answers: a group of creates of one
	// Type asks once.
	matched []typeMatch
	// there are instances AddUses found (a few: the backends of a group's
	// creates), until an instance is deleted.
	there []string
}

// maxThere bounds txKnown.there.
const maxThere = 8

type typeMatch struct {
	ref    cairn.TypeRef
	schema string
	null   bool // no schema (NULL)
	named  bool
}

// forget drops everything known; nil-safe.
func (k *txKnown) forget() {
	if k != nil {
		*k = txKnown{matched: k.matched[:0], there: k.there[:0]}
	}
}

// isThere reports whether instance id is known to be there; nil-safe.
func (k *txKnown) isThere(id string) bool {
	return k != nil && slices.Contains(k.there, id)
}

// found records that instance id is there; nil-safe.
func (k *txKnown) found(id string) {
	if k != nil && len(k.there) < maxThere && !slices.Contains(k.there, id) {
		k.there = append(k.there, id)
	}
}

// deleted forgets the instances known to be there, one of which may be
// the one deleted; nil-safe.
func (k *txKnown) deleted() {
	if k != nil {
		k.there = k.there[:0]
	}
}

// forgetTypes drops the Type checks, before a write to types; nil-safe.
func (k *txKnown) forgetTypes() {
	if k != nil {
		k.matched = k.matched[:0]
	}
}

// logged records the Seq of a change the transaction just logged.
func (k *txKnown) logged(seq int64) {
	if k != nil && seq > k.lastSeq {
		k.lastSeq = seq
	}
}

// boundStmts caches tx.StmtContext results so that a transaction making many
// calls binds each statement once.
type boundStmts struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (r reader) inTx(tx *sql.Tx) reader {
	r.tx = tx
	r.bound = &boundStmts{m: make(map[string]*sql.Stmt)}
	return r
}

// inWriteTx is inTx for the writer's transaction.
func (r reader) inWriteTx(tx *sql.Tx) reader {
	r = r.inTx(tx)
	r.known = &txKnown{}
	return r
}

// stmt returns the prepared statement for q, nil when q is not one of the
// fixed queries.
func (r reader) stmt(ctx context.Context, q string) *sql.Stmt {
	st := r.shared[q]
	if st == nil || r.tx == nil {
		return st
	}
	r.bound.mu.Lock()
	defer r.bound.mu.Unlock()
	b := r.bound.m[q]
	if b == nil {
		b = r.tx.StmtContext(ctx, st)
		r.bound.m[q] = b
	}
	return b
}

func (r reader) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	switch st := r.stmt(ctx, q); {
	case st != nil:
		return st.QueryContext(ctx, args...)
	case r.tx != nil:
		return r.tx.QueryContext(ctx, q, args...)
	default:
		return r.db.QueryContext(ctx, q, args...)
	}
}

func (r reader) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	switch st := r.stmt(ctx, q); {
	case st != nil:
		return st.QueryRowContext(ctx, args...)
	case r.tx != nil:
		return r.tx.QueryRowContext(ctx, q, args...)
	default:
		return r.db.QueryRowContext(ctx, q, args...)
	}
}

// run runs a statement: prepared if it is one of the fixed queries, in the
// transaction if there is one.
func (r reader) run(ctx context.Context, q string, args ...any) (sql.Result, error) {
	switch st := r.stmt(ctx, q); {
	case st != nil:
		return st.ExecContext(ctx, args...)
	case r.tx != nil:
		return r.tx.ExecContext(ctx, q, args...)
	default:
		return r.db.ExecContext(ctx, q, args...)
	}
}

// exec runs a statement and returns the number of rows it changed.
func (r reader) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := r.run(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execSeq runs an insert into changes and returns the Seq it logged (the
// row's rowid), 0 when it inserted nothing. The Seq is also the
// transaction's newest (txKnown).
func (r reader) execSeq(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := r.run(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	// LastInsertId is the connection's last insert into any rowid table:
	// this statement's only when it inserted a row.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	r.known.logged(seq)
	return seq, nil
}

// each runs a query of three string columns and calls fn per row.
func (r reader) each(ctx context.Context, fn func(a, b, c string), q string, args ...any) error {
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			return err
		}
		fn(a, b, c)
	}
	return rows.Err()
}

// prepare prepares qs on db for the store's lifetime.
func prepare(ctx context.Context, db *sql.DB, qs ...string) (map[string]*sql.Stmt, error) {
	m := make(map[string]*sql.Stmt, len(qs))
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			closeAll(m)
			return nil, err
		}
		m[q] = st
	}
	return m, nil
}

func closeAll(m map[string]*sql.Stmt) {
	for _, st := range m {
		st.Close()
	}
}

// tx implements store.Tx. SQLite locks the whole database for the writer,
// so rows read through it are locked against other writers as the contract
// asks.
type tx struct {
	reader
	// recordedOne and recorded are the instances with a change in this
	// transaction: the first in recordedOne (a write mostly changes one,
	// and a map per write was 2% of a create's allocated bytes), the
	// others in recorded.
	recordedOne string
	recorded    map[string]bool
	after       []func() // AfterCommit's functions
	// created is the last instance this write created and its backend.
	created struct{ id, backend string }
}

// AfterCommit has fn run once the transaction has committed
// (store.AfterCommitter).
func (t *tx) AfterCommit(fn func()) bool {
	t.after = append(t.after, fn)
	return true
}

var (
	_ store.Tx          = (*tx)(nil)
	_ store.TypeMatcher = (*tx)(nil)
)
