// Package postgres is the metadata store for several cairn replicas:
// store.Store on one PostgreSQL database through pgx (pgxpool). It keeps the
// data model of store/sqlite in PostgreSQL types and passes the same contract
// suite (store/storetest).
//
// Every rule that must hold across replicas is enforced by the database, never
// by process memory:
//
//   - uniqueness of (type path, namespace, name) and of ids: unique indexes,
//     inserts with ON CONFLICT DO NOTHING so a lost race is reported as
//     CodeAlreadyExists without aborting the transaction;
//   - Tx.GetInstances and Tx.GetInstancesBrief lock the rows they return
//     (SELECT ... FOR NO KEY UPDATE, in id order), so the hub's
//     read-check-write inside one Update is safe against every other replica;
//   - AddResourceVersion is a compare-and-set on the instance row
//     (latest_rv = rv-1), and the resource version's primary key catches
//     anything that slips past;
//   - SetLockedBy, SetMetadata and DeleteInstance lock the rows they change;
//     AddUses takes key-share locks on both ends, so an instance cannot be
//     deleted while an edge to it is being added.
//
// # Transactions
//
// Update runs fn in one READ COMMITTED transaction. READ COMMITTED is chosen
// over SERIALIZABLE because of the row locks: a writer that waited for a lock
// reads the row as the previous holder committed it (each statement takes a
// new snapshot), so concurrent updates of one instance queue up and each gets
// the next resource version, instead of failing with serialization errors
// and retrying. Tx.GetInstances therefore locks first and reads afterwards,
// in two statements. A deadlock (40P01) or serialization failure (40001) can
// still happen, for example when two transactions lock the same rows in
// different calls; Update then rolls back and runs fn again, up to
// maxAttempts times with a jittered backoff, as store.Store allows.
//
// A transaction costs few round trips (txConn): BEGIN goes out with its
// first statement, the change notification with COMMIT, and writes to an
// instance whose row the transaction holds locked (SetMetadata, SetStatus,
// SetManagedFields after GetInstances, CreateInstance or
// AddResourceVersion) with its next statement, in order: such a write can
// only fail as the database fails (a deadlock, a lost connection), and
// then every later call fails with its error and the transaction never
// commits.
//
// # The change log
//
// Pollers on other replicas read the change log by position (Changes after
// a Seq), so a change must never become visible after a change with a higher
// Seq: a poller that already moved past would skip it. With a plain sequence
// that happens whenever two transactions take Seqs in one order and commit in
// the other. Here every statement that logs a change first locks the one row
// of change_log_lock (SELECT ... FOR UPDATE, in the same statement) and takes
// Seqs from the sequence changes_seq only after that; the lock is held until
// the transaction ends. The next change-log writer blocks on it until this
// transaction has committed, and PostgreSQL makes a commit visible before it
// releases the transaction's locks, so that writer's Seqs are higher than
// every Seq of a visible change: Seq order equals commit order and every
// snapshot sees a prefix of the log. LastSeq, the highest committed Seq (or
// the pruned point once everything was pruned), never goes backwards, and a
// sequence never hands out a value twice, so Seqs are not reused after
// pruning. A rolled-back transaction leaves a gap, which pollers skip over.
// Seqs are assigned inside the transaction, so reads through it see the
// instances' new Seqs.
//
// The price is that transactions that log changes are serialized from their
// first change to their commit (SQLite serializes all writers); reads, and
// the row-locked reads before the first change, run in parallel. A
// transaction that takes a row lock after its first change can deadlock with
// one that holds that row and waits for the change-log lock; PostgreSQL
// aborts one of them and Update runs it again. The hub takes its row locks
// first (Tx.GetInstances), and a delete takes the change-log lock before its
// FOR UPDATE lock of the row (which blocks the key-share lock of a create
// adding an edge to it), so this is limited to rare cases.
//
// For the same reason no statement changes an instance row before its
// transaction holds the change-log lock (changes are logged first, or in the
// same statement): a create checks its name in the unique index, which waits
// for any transaction that changed the row holding that name, and a create
// holds the change-log lock from its insert on. A lock taken after the row
// change would make a create of a taken name and a lock or unlock of the
// instance holding it wait for each other until the deadlock detector
// (deadlock_timeout, 1s by default) aborted one.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Option configures Open.
type Option func(*options)

type options struct {
	schema    string
	maxConns  int32
	log       *slog.Logger
	noMigrate bool
}

// WithSchema makes every connection use the given schema (search_path): the
// tables are created and read there. It must exist. The default is the
// database's search_path, normally "public".
func WithSchema(name string) Option {
	return func(o *options) { o.schema = name }
}

// WithMaxConns caps the connection pool. The default is pgxpool's
// (max(4, GOMAXPROCS)) unless the DSN sets pool_max_conns.
func WithMaxConns(n int32) Option {
	return func(o *options) { o.maxConns = n }
}

// WithLogger receives the migrations applied at Open.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithoutMigrating opens the store as it is, for what must not change it
// (a backup): a schema without cairn's tables (ErrNoSchema) or at an older
// version than this binary's (ErrSchemaTooOld) is refused, not migrated.
func WithoutMigrating() Option {
	return func(o *options) { o.noMigrate = true }
}

// maxAttempts bounds how often Update runs fn when PostgreSQL reports a
// deadlock or a serialization failure.
const maxAttempts = 8

// Store is a metadata store on one PostgreSQL database. It is safe for
// concurrent use, also by several processes on the same database.
type Store struct {
	pool *pgxpool.Pool
	desc string
	// schema is WithSchema's, the payload of change notifications (notify.go).
	schema string
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string, as libpq and pgx accept them) and migrates its schema to the
// version this binary knows, one step per transaction under an advisory
// lock, so replicas starting together migrate once. It refuses a database
// whose schema is newer (ErrSchemaTooNew).
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in parse errors.
		return nil, &cairn.Error{Code: cairn.CodeInvalid, Msg: fmt.Sprintf("postgres: parse the connection string: %v", err), Err: err}
	}
	if o.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.schema}.Sanitize()
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "cairn"
	}
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	s := &Store{desc: describe(cfg.ConnConfig, o.schema), schema: o.schema}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", s.desc, classify(err))
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", s.desc, classify(err))
	}
	check := func() error { return migrate(ctx, s.pool, o.log) }
	if o.noMigrate {
		check = func() error { return checkVersion(ctx, s.pool) }
	}
	if err := check(); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", s.desc, err)
	}
	return s, nil
}

// describe names the database for messages and logs, without the password.
func describe(c *pgx.ConnConfig, schema string) string {
	host := c.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, fmt.Sprint(c.Port))
	}
	d := fmt.Sprintf("postgresql://%s@%s/%s", c.User, host, c.Database)
	if schema == "" {
		schema = c.RuntimeParams["search_path"]
	}
	if schema != "" {
		d += " (schema " + schema + ")"
	}
	return d
}

// String names the database without credentials.
func (s *Store) String() string { return s.desc }

// Close waits for the connections in use to be returned and closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Update runs fn in one READ COMMITTED transaction and commits; see the
// package documentation for the locking and for why fn may run more than
// once.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.updateOnce(ctx, fn)
		if err == nil || !retryable(err) {
			return err
		}
		if attempt == maxAttempts {
			return &cairn.Error{Code: cairn.CodeConflict, Err: err,
				Msg: fmt.Sprintf("postgres: transaction gave up after %d attempts: %v", attempt, err)}
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

func (s *Store) updateOnce(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) (err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin transaction: %w", classify(err))
	}
	c := newTxConn(pc)
	defer c.release()
	done := false
	defer func() {
		if !done {
			c.rollback(context.WithoutCancel(ctx)) // fn panicked; the panic goes on
		}
	}()
	t := &tx{reader: reader{q: c, lock: true}, conn: c}
	if err := fn(ctx, t); err != nil {
		done = true
		if rbErr := c.rollback(context.WithoutCancel(ctx)); rbErr != nil {
			return errors.Join(err, fmt.Errorf("postgres: rollback: %w", classify(rbErr)))
		}
		return err
	}
	done = true
	// Other replicas' watchers hear of the changes at commit (notify.go);
	// the notification goes out with the COMMIT, in one round trip.
	return c.commit(ctx, t.recorded != nil, s.schema)
}

// retryable reports a deadlock or serialization failure anywhere in err.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// backoff waits a jittered, growing delay before another attempt.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(1+rand.IntN(1<<min(attempt, 6))) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Unreachable reports whether err (from Open) says the server could not be
// reached or takes no connections yet: refused, timed out, a host name
// that does not resolve, a connection lost, a server starting up or
// shutting down (57P), out of connections or resources (53), a connection
// exception (08). Waiting may cure those, as when cairn starts before its
// database. It is false for a server that answered no (a wrong password, a
// missing database or schema, a schema too new, a TLS setting it refused),
// which only a change of configuration cures.
func Unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57P")
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}

// classify gives PostgreSQL errors cairn's codes, keeping the original in
// the chain: lost connections and an overloaded server are CodeUnavailable
// (retry later, 503), unique violations CodeAlreadyExists, deadlocks and
// serialization failures CodeConflict, bad input CodeInvalid.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		code := cairn.Code("")
		switch {
		case pe.Code == "23505":
			code = cairn.CodeAlreadyExists
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "23503", pe.Code == "55P03":
			code = cairn.CodeConflict
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57P"):
			code = cairn.CodeUnavailable
		case strings.HasPrefix(pe.Code, "22"):
			code = cairn.CodeInvalid
		}
		if code != "" {
			return &cairn.Error{Code: code, Msg: err.Error(), Err: err}
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	// A server that went away without a word (killed, failed over, cut by
	// a proxy) ends the stream: io.ErrUnexpectedEOF mid-answer, and "conn
	// closed" for what then uses the connection.
	lost := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
	if lost || errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) {
		return &cairn.Error{Code: cairn.CodeUnavailable, Msg: err.Error(), Err: err}
	}
	return err
}

// PoolStats is the connection pool's state, for metrics: its size, the
// connections in use, idle and being opened, and the acquires so far, with
// those that had to wait for a connection (the pool was exhausted) and how
// long they waited.
type PoolStats struct {
	MaxConns, AcquiredConns, IdleConns, ConstructingConns int32
	Acquires, CanceledAcquires, WaitedAcquires            int64
	Waited                                                time.Duration
}

// PoolStats reports the connection pool's state now.
func (s *Store) PoolStats() PoolStats {
	st := s.pool.Stat()
	return PoolStats{
		MaxConns: st.MaxConns(), AcquiredConns: st.AcquiredConns(), IdleConns: st.IdleConns(), ConstructingConns: st.ConstructingConns(),
		Acquires: st.AcquireCount(), CanceledAcquires: st.CanceledAcquireCount(), WaitedAcquires: st.EmptyAcquireCount(),
		Waited: st.EmptyAcquireWaitTime(),
	}
}
