// Package sqlite is the embedded metadata store: store.Store on one SQLite
// file through the pure-Go driver modernc.org/sqlite, so cairn stays a single
// static binary (see DRIVER.md for the measurements behind that choice).
//
// The file is opened in WAL mode with two connection pools: one connection for
// writers, whose transactions start with BEGIN IMMEDIATE so they serialize and
// a read-check-write inside Update cannot race, and a pool of query-only
// connections whose reads see a consistent snapshot without blocking the
// writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Option configures Open.
type Option func(*options)

type options struct {
	busyTimeout time.Duration
	maxReaders  int
	// checkpoint and walLimit are the checkpointer's and the writer's
	// checkpoint thresholds in pages (checkpointPages, walLimitPages;
	// tests set smaller ones). With checkpoint 0 there is no
	// checkpointer and the writer checkpoints at SQLite's default, as
	// before (the baseline of a benchmark).
	checkpoint, walLimit int
	// plainWAL has the writer write WAL frames through SQLite's own VFS,
	// a write per header and per page (the baseline of BenchmarkWALVFS).
	plainWAL bool
	// noMigrate: WithoutMigrating.
	noMigrate bool
	log       *slog.Logger
	// sync is the synchronous pragma: SyncNormal or SyncFull.
	sync Sync
}

// Sync is how far a commit is on disk when the store acknowledges it:
// SQLite's synchronous setting in WAL mode.
type Sync string

const (
	// SyncNormal (Open's default) acknowledges a commit once it is in the
	// write-ahead log in the OS's page cache: it survives the process
	// crashing or being killed at any point, but a power loss or an
	// operating-system crash may take the commits made since the WAL was
	// last synced, which a checkpoint does (at most about 1,000 pages
	// apart). SQLite's own recommendation for WAL mode; PocketBase and
	// Litestream run so.
	SyncNormal Sync = "normal"
	// SyncFull syncs the write-ahead log before every commit is
	// acknowledged, as PostgreSQL and etcd do by default: a power loss
	// loses no acknowledged write. A group commit (group.go) pays one
	// sync for all of its writes. cairn's CLI and server default to it
	// (--sqlite-synchronous); Open does not, so that tests and
	// benchmarks of the store do not wait on the disk.
	SyncFull Sync = "full"
)

// ParseSync reads a Sync by name.
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case SyncNormal, SyncFull:
		return Sync(s), nil
	}
	return "", fmt.Errorf("%q is not a synchronous setting: want %q or %q", s, SyncNormal, SyncFull)
}

// WithSync sets how far a commit is on disk when it is acknowledged
// (SyncNormal by default).
func WithSync(s Sync) Option {
	return func(o *options) { o.sync = s }
}

// WithLogger receives what the store reports beside its calls' errors: a
// checkpoint that failed (a full disk) or could not restart the WAL. The
// default discards it.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithoutMigrating opens the store as it is, for what must not change it
// (a backup): a file that is not there, or holds no cairn schema, is
// refused (ErrNoStore) instead of created, and a schema at an older
// version than this binary's (ErrSchemaTooOld) instead of migrated.
func WithoutMigrating() Option {
	return func(o *options) { o.noMigrate = true }
}

// WithBusyTimeout sets how long a statement waits for a lock held by another
// process before failing with CodeUnavailable. The default is 5s.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// WithMaxReaders caps the read connection pool. The default is
// max(4, GOMAXPROCS).
func WithMaxReaders(n int) Option {
	return func(o *options) { o.maxReaders = n }
}

// Store is a metadata store on one SQLite file. It is safe for concurrent use.
type Store struct {
	w    *sql.DB // one connection: writers queue here instead of spinning on SQLITE_BUSY
	r    *sql.DB // query-only connections
	wr   reader  // w with its prepared statements
	rd   reader  // r with its prepared statements
	path string
	// position answers LastSeq from the WAL-index header (position.go).
	position positionCache
	// commit groups concurrent Updates into one transaction (group.go).
	commit committer
	// ckpt copies the WAL into the database off the write path
	// (checkpoint.go).
	ckpt *checkpointer
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its parent directories if needed) the SQLite
// database at path and migrates its schema to the version this binary knows.
// It refuses a database whose schema is newer than that (ErrSchemaTooNew).
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: 5 * time.Second, maxReaders: max(4, runtime.GOMAXPROCS(0)),
		checkpoint: checkpointPages, walLimit: walLimitPages, log: slog.New(slog.DiscardHandler), sync: SyncNormal}
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if _, err := ParseSync(string(o.sync)); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The database holds the built-in backend's values, secrets among
	// them: what Open creates is its owner's only. SQLite would create the
	// file 0644, and gives the WAL and shared-memory files the database
	// file's mode, so creating it first covers those too. An existing
	// file keeps the mode its owner chose.
	if o.noMigrate {
		if _, err := os.Stat(abs); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				err = ErrNoStore
			}
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
	} else if err := createFile(abs); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	if err := registerWALVFS(); err != nil {
		return nil, err
	}
	s := &Store{path: abs, position: positionCache{shmPath: abs + "-shm"}}
	s.w, err = sql.Open("sqlite", dsn(abs, o, roleWriter))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	check := func() error { return migrateRetrying(ctx, s.w, o.busyTimeout) }
	if o.noMigrate {
		check = func() error { return checkVersion(ctx, s.w) }
	}
	if err := check(); err != nil {
		s.w.Close()
		if werr := writableDir(filepath.Dir(abs)); werr != nil {
			// SQLite says only "unable to open database file".
			return nil, fmt.Errorf("sqlite: open %s: %w: SQLite writes the write-ahead log and its index (%s-wal, -shm) beside the database, even to read it: %w",
				path, err, filepath.Base(abs), werr)
		}
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	s.r, err = sql.Open("sqlite", dsn(abs, o, roleReader))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.r.SetMaxOpenConns(o.maxReaders)
	s.r.SetMaxIdleConns(o.maxReaders)
	s.wr.db, s.rd.db = s.w, s.r
	s.wr.types = &typeDecodes{}
	s.rd.types = s.wr.types
	if s.wr.shared, err = prepare(ctx, s.w, append(readQueries(), writeQueries()...)...); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: prepare: %w", path, err)
	}
	if s.rd.shared, err = prepare(ctx, s.r, readQueries()...); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: prepare: %w", path, err)
	}
	if o.checkpoint <= 0 {
		return s, nil
	}
	ckdb, err := sql.Open("sqlite", dsn(abs, o, roleCheckpointer))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	ckdb.SetMaxOpenConns(1)
	ckdb.SetMaxIdleConns(1)
	ckdb.SetConnMaxLifetime(0)
	ckdb.SetConnMaxIdleTime(0)
	s.ckpt = newCheckpointer(ckdb, abs+"-shm", o.checkpoint, o.walLimit, o.log.With("path", abs))
	return s, nil
}

// role is what a connection pool is for.
type role int

const (
	roleWriter       role = iota // the one writer connection
	roleReader                   // the query-only pool
	roleCheckpointer             // the checkpointer's connection
)

// dsn builds a modernc.org/sqlite URI. The path is escaped so that '?', '#'
// and '%' in a file name cannot be read as URI syntax.
func dsn(path string, o options, r role) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("synchronous(%s)", o.sync))
	// Deleted and rewritten rows are zeroed, not left in free pages: values
	// re-encrypted at rest (package atrest) or deleted leave no plaintext.
	q.Add("_pragma", "secure_delete(1)")
	switch r {
	case roleReader:
		q.Add("_pragma", "query_only(1)")
	case roleWriter:
		q.Set("_txlock", "immediate")
		// The writer's WAL frames go to the file in one write per
		// transaction (walvfs.go).
		if !o.plainWAL {
			q.Set("vfs", walVFSName)
		}
		// The savepoints of a group commit (group.go) keep their undo
		// pages in a sub-journal, which would otherwise spill to a
		// temporary file past 64 KiB: a write syscall per page.
		q.Add("_pragma", "temp_store(MEMORY)")
		// The checkpointer copies the WAL into the database and has
		// the writer restart it (checkpoint.go); SQLite's own
		// autocheckpoint stays as a fallback, should the WAL index be
		// unreadable.
		if o.checkpoint > 0 {
			q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", 2*o.walLimit))
		}
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// Compact moves the write-ahead log into the database file and truncates
// it, so that page images written before (plaintext a re-encryption just
// replaced, say) no longer sit in the -wal file.
func (s *Store) Compact(ctx context.Context) error {
	if s.ckpt != nil {
		// A checkpoint of the checkpointer's under way would make this
		// one find SQLite's checkpoint lock taken and do nothing.
		s.ckpt.running.Lock()
		defer s.ckpt.running.Unlock()
	}
	var busy, frames, copied int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err != nil {
		return fmt.Errorf("sqlite: checkpoint %s: %w", s.path, err)
	}
	if busy != 0 {
		return &cairn.Error{Code: cairn.CodeUnavailable,
			Msg: fmt.Sprintf("sqlite: checkpoint %s: the write-ahead log could not be emptied: readers still use it (%d of %d pages copied)", s.path, copied, frames)}
	}
	return nil
}

// Close releases the connection pools. The writer, closed last, copies
// what is left of the WAL into the database and removes it.
func (s *Store) Close() error {
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.close())
	}
	s.position.close()
	closeAll(s.wr.shared)
	closeAll(s.rd.shared)
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.path, err)
	}
	return nil
}

// Update runs fn in one BEGIN IMMEDIATE transaction on the writer connection.
// Since that lock is taken before fn runs, SQLite never reports a
// serialization failure mid-transaction and fn is not retried. Concurrent
// Updates may share a transaction, each in a savepoint of its own (group
// commit, group.go): fn's writes commit, or roll back, as one, and Update
// returns only once they are committed. A write whose ctx has ended before
// it begins is not run; once begun it runs to its end whatever becomes of
// ctx (its fn gets ctx without the cancellation). Update must not be called
// from inside fn: the writer connection is already taken.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.noRoom(s.update(ctx, fn))
}

// noRoom makes a write refused for want of disk space, or because the
// file system turned read-only, Unavailable (as PostgreSQL's disk_full
// is), saying which file system and what to do: nothing was written, and
// writes succeed again once the file system has room, without a restart.
func (s *Store) noRoom(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return &cairn.Error{Code: cairn.CodeUnavailable, Err: err,
			Msg: fmt.Sprintf("%v: the file system holding %s is full: free space there; nothing was written, and writes resume without a restart", err, s.path)}
	case sqlite3.SQLITE_READONLY:
		return &cairn.Error{Code: cairn.CodeUnavailable, Err: err,
			Msg: fmt.Sprintf("%v: %s cannot be written (a read-only file system or file): nothing was written", err, s.path)}
	}
	return err
}

// rolledBack reports whether err is one of the errors by which SQLite may
// have rolled the whole transaction back itself
// (https://www.sqlite.org/lang_transaction.html): a rollback after it
// then finds no transaction, which is no further failure.
func rolledBack(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_NOMEM:
		return true
	}
	return false
}

// view runs fn in a read transaction on the reader pool, so reads made of
// several queries see one snapshot.
func (s *Store) view(ctx context.Context, fn func(r reader) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(fmt.Errorf("sqlite: begin read transaction: %w", err))
	}
	defer sqlTx.Rollback() // read-only: rollback and commit are the same
	return fn(s.rd.inTx(sqlTx))
}

// isForeignKeyFailure reports whether err is SQLite refusing a row whose
// foreign key names no row.
func isForeignKeyFailure(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// isUniqueFailure reports whether err is SQLite refusing a row whose
// primary key or unique columns another row has.
func isUniqueFailure(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code()
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

// migrateRetrying migrates, trying again while the database answers busy
// for up to the busy timeout. Processes opening a new database together
// meet SQLite locks the busy timeout does not cover: the connection's switch
// to WAL mode and the first lock on a file another process is converting.
func migrateRetrying(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := migrate(ctx, db)
		if err == nil || !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// classify turns a busy or locked database into CodeUnavailable: the caller
// may retry, and façades map it to 503.
func classify(err error) error {
	if isBusy(err) {
		return &cairn.Error{Code: cairn.CodeUnavailable, Msg: err.Error(), Err: err}
	}
	return err
}

// writableDir reports why files cannot be created in dir, if they cannot
// (a read-only file system, a directory of someone else's).
func writableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".cairn-write-check-*")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot create files in %s: %w", dir, pe.Err)
	}
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// createFile makes the database file and its directories, its owner's only,
// unless the file is there.
func createFile(abs string) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}
