package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// The writer's WAL VFS (walvfs.go) holds frames until their commit: every
// acknowledged write is visible at once to the other connections, a
// transaction that spills pages before its commit (a small page cache)
// and one that outgrows what the VFS holds commit whole, one rolled back
// after spilling leaves nothing, and the file is one SQLite's own VFS
// reads as sound (a process with the plain VFS, as `cairn --data-dir` beside
// a server).
func TestWALVFS(t *testing.T) {
	ctx := t.Context()
	s := groupStore(t)
	// Writes one at a time, each read back at once on the reader pool.
	for n := 1; n <= 50; n++ {
		if err := s.Update(ctx, create(n, false)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetInstancesBrief(ctx, []string{flag(n).ID}); err != nil || len(got) != 1 {
			t.Fatalf("instance %d right after its write: %v, %v", n, got, err)
		}
	}
	// A page cache of 16 pages makes SQLite write frames before the
	// commit and read them back; 3,000 creates are over 1 MiB of frames.
	if _, err := s.w.ExecContext(ctx, "PRAGMA cache_size = 16"); err != nil {
		t.Fatal(err)
	}
	many := func(from, to int, fail bool) func(ctx context.Context, tx store.Tx) error {
		return func(ctx context.Context, tx store.Tx) error {
			for n := from; n <= to; n++ {
				if err := create(n, false)(ctx, tx); err != nil {
					return err
				}
			}
			if fail {
				return errors.New("refused after writing")
			}
			return nil
		}
	}
	refused := s.Update(ctx, many(5001, 7000, true))
	if refused == nil {
		t.Fatal("the refused transaction committed")
	}
	if err := s.Update(ctx, many(1001, 4000, false)); err != nil {
		t.Fatal(err)
	}
	count := func(db *sql.DB) (n int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM instances").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(s.r); got != 3050 {
		t.Fatalf("%d instances after the large transaction and the refused one, want 3,050", got)
	}
	if err := s.Update(ctx, create(51, false)); err != nil {
		t.Fatal(err)
	}

	// Another connection through SQLite's own VFS reads the same.
	plain, err := sql.Open("sqlite", "file:"+s.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got := count(plain); got != 3051 {
		t.Fatalf("the plain VFS reads %d instances, want 3,051", got)
	}
	var check string
	if err := plain.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	// And writes the writer then reads back (its WAL grows past what the
	// writer wrote last).
	if _, err := plain.ExecContext(ctx, "INSERT INTO types (path, revision, revision_key, created_at) VALUES ('x.y', '1.0.0', '1.0.0', 0)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(ctx context.Context, stx store.Tx) error {
		var n int
		if err := stx.(*tx).queryRow(ctx, "SELECT count(*) FROM types WHERE path = 'x.y'").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("the writer sees %d of the plain connection's rows: %v", n, err)
		}
		return create(52, false)(ctx, stx)
	}); err != nil {
		t.Fatal(err)
	}
	if got := count(plain); got != 3052 {
		t.Fatalf("the plain VFS reads %d instances after the writer's next write, want 3,052", got)
	}
}

// heldFor is how many bytes the WAL VFS holds for the WAL at path.
func heldFor(path string) (n int64) {
	walOpenFiles.Lock()
	defer walOpenFiles.Unlock()
	for _, w := range walOpenFiles.wals[path] {
		n += fileOf(w).n
	}
	return n
}

// A transaction that spills pages to the WAL and is rolled back leaves its
// frames held; they are dropped at the release of the write lock, so a
// commit another connection makes next is never overwritten by them when
// this connection writes again.
func TestWALVFSDropsARolledBackTransactionsFrames(t *testing.T) {
	ctx := t.Context()
	if err := registerWALVFS(); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/t.db"
	db, err := sql.Open("sqlite", "file:"+path+"?vfs="+walVFSName+"&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	plain, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	exec := func(db *sql.DB, q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(db, "CREATE TABLE t (n INTEGER, b BLOB)")
	exec(db, "PRAGMA cache_size = 2")

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// Overflow pages of a 300 KiB blob, each written once and spilled.
	if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (1, randomblob(300 * 1024))"); err != nil {
		t.Fatal(err)
	}
	if heldFor(path+"-wal") == 0 {
		t.Fatal("no frames held after the spill: the test does not test the drop")
	}
	// SQLite's rollback may read a page back from the WAL, which writes
	// the held frames while the lock is still held; what it leaves is
	// dropped when it releases the lock. Both are asked for here: the
	// drop, directly, and the release at the rollback's end.
	walOpenFiles.Lock()
	var dbFile uintptr
	for p, wal := range walOpenFiles.dbs {
		if wal == path+"-wal" {
			dbFile = p
		}
	}
	released := walOpenFiles.releases
	walOpenFiles.Unlock()
	dropHeld(dbFile)
	if n := heldFor(path + "-wal"); n != 0 {
		t.Fatalf("%d bytes held after the drop", n)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	walOpenFiles.Lock()
	releasedNow := walOpenFiles.releases
	walOpenFiles.Unlock()
	if releasedNow <= released {
		t.Fatal("the rollback released no write lock the VFS saw")
	}
	if n := heldFor(path + "-wal"); n != 0 {
		t.Fatalf("%d bytes held after the rollback", n)
	}
	conn.Close()

	exec(plain, "INSERT INTO t VALUES (2, x'00')")
	exec(db, "INSERT INTO t VALUES (3, x'00')")
	var got []int
	rows, err := plain.QueryContext(ctx, "SELECT n FROM t ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	rows.Close()
	if fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("rows %v, want [2 3]", got)
	}
	var check string
	if err := plain.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
}
