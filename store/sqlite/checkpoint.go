package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints (copying the write-ahead log into the database file) run
// mostly off the write path. SQLite's autocheckpoint runs one inside the
// commit that takes the WAL past 1,000 pages: that writer syncs the WAL,
// copies every page and syncs the database file (two fsyncs, 2-12 ms each
// on a shared VM) while every other writer queues behind it. Here a
// goroutine with a connection of its own runs PASSIVE checkpoints (they
// neither wait for nor block readers and writers) every checkpointPages,
// so the copying and its syncs happen beside the writes.
//
// The WAL restarts from its beginning only at a write that finds every
// frame copied and no reader using it, which a checkpoint beside a steady
// stream of writes never quite reaches, nor one that readers keep from
// copying the newest frames (SQLite's autocheckpoint then lets the WAL
// grow for as long as they come). So when the WAL reaches walLimitPages,
// the writer, between two transactions, runs a RESTART checkpoint: it
// copies the few frames the goroutine has not, waits (up to restartWait)
// for readers of older snapshots to finish, and makes the next write start
// the WAL over. Writers so wait for two fsyncs and a little copying every
// walLimitPages instead of a whole checkpoint every 1,000 pages, and the
// WAL stays near walLimitPages. A reader that keeps its snapshot longer (a
// long backup) makes the RESTART give up; the next is tried once the WAL
// has grown by another walLimitPages, so such a reader costs writers at
// most restartWait per walLimitPages written.
//
// Durability is SQLite's for journal_mode=WAL, synchronous=NORMAL as
// before, since a checkpoint is the same operation on whichever connection
// runs it: a commit is in the WAL (the OS's page cache) when Update
// returns, so it survives the process crashing at any point, during a
// checkpoint too; a checkpoint syncs the WAL before it copies a page into
// the database file and syncs the database file before it records the
// pages as copied, and a crash halfway leaves the WAL, which the next open
// replays. What a power loss may take is unchanged too: commits since the
// WAL was last synced, that is since the last checkpoint (at most
// checkpointPages apart, as before).
const (
	// checkpointPages is how many pages the WAL holds beyond those
	// copied before the goroutine checkpoints: SQLite's autocheckpoint
	// default.
	checkpointPages = 1000
	// walLimitPages is where the writer restarts the WAL.
	walLimitPages = 4 * checkpointPages
	// restartWait bounds how long the writer's RESTART waits for the
	// readers of older snapshots, holding other writers back.
	restartWait = 250 * time.Millisecond
)

// checkpointer runs the checkpoints of one Store.
type checkpointer struct {
	db      *sql.DB // one connection of its own
	shmPath string
	log     *slog.Logger
	pages   int // checkpointPages, smaller in tests
	limit   int // walLimitPages, smaller in tests

	kick     chan struct{} // the WAL has pages to copy; buffered 1
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu          sync.Mutex
	shm         *os.File // the WAL index, opened on first use
	nextRestart int      // the WAL size (frames) of the writer's next RESTART

	// running is held by a checkpoint under way (the goroutine's or the
	// writer's): two at once would find SQLite's checkpoint lock taken.
	running           sync.Mutex
	passive, restarts atomic.Int64 // checkpoints run, for tests
}

func newCheckpointer(db *sql.DB, shmPath string, pages, limit int, log *slog.Logger) *checkpointer {
	c := &checkpointer{
		db: db, shmPath: shmPath, log: log, pages: pages, limit: limit, nextRestart: limit,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go c.run()
	return c
}

// committed is called by the writer after each commit, while no other
// transaction can start. It wakes the goroutine when the WAL has
// checkpointPages to copy, and restarts the WAL on w when it has reached
// the limit. A nil checkpointer (the writer checkpoints itself at SQLite's
// default, a benchmark's baseline) does nothing.
func (c *checkpointer) committed(w *sql.DB) {
	if c == nil {
		return
	}
	frames, copied, ok := c.walState()
	if !ok {
		return // no WAL index to read: the writer's autocheckpoint is the fallback
	}
	c.mu.Lock()
	restart := frames >= c.nextRestart
	c.mu.Unlock()
	if restart {
		c.restart(w, frames)
		return
	}
	if frames-copied >= c.pages {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// restart runs a RESTART checkpoint on the writer's connection, after the
// goroutine's under way if there is one (it started before the limit, so
// little is left to copy after it).
func (c *checkpointer) restart(w *sql.DB, frames int) {
	c.running.Lock()
	defer c.running.Unlock()
	c.restarts.Add(1)
	busy, log, copied, err := c.restartOn(w)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && busy != 0 && log == -1 {
		return // another process checkpoints: the next commit tries again
	}
	if err != nil || busy != 0 {
		// Readers kept it waiting past the busy timeout: try again
		// once the WAL has grown by as much again.
		c.nextRestart = frames + c.limit
		c.log.Warn("sqlite: the WAL could not be restarted; readers still use it", "frames", log, "copied", copied, "err", err)
		return
	}
	c.nextRestart = c.limit
}

// restartOn runs the RESTART on the writer's one connection, waiting for
// readers up to restartWait, less than the busy timeout for other waits.
func (c *checkpointer) restartOn(w *sql.DB) (busy, log, copied int, err error) {
	ctx := context.Background()
	conn, err := w.Conn(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	var timeout int
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		return 0, 0, 0, err
	}
	wait := min(timeout, int(restartWait.Milliseconds()))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait)); err != nil {
		return 0, 0, 0, err
	}
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &log, &copied)
	if _, rerr := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", timeout)); rerr != nil {
		// The connection must not keep the short timeout.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		err = errors.Join(err, rerr)
	}
	return busy, log, copied, err
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// Past the limit the writer's RESTART is due, which a
		// checkpoint here would keep from running.
		walFrames, _, ok := c.walState()
		c.mu.Lock()
		due := ok && walFrames >= c.nextRestart
		c.mu.Unlock()
		if due {
			continue
		}
		c.passive.Add(1)
		var busy, frames, copied int
		c.running.Lock()
		err := c.db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		c.running.Unlock()
		if err != nil {
			select {
			case <-c.stop:
				return // closing
			default:
			}
			c.log.Warn("sqlite: checkpoint failed; the next commit tries again", "err", err)
		}
	}
}

// walState reads from the WAL index (the -shm file) how many frames the
// WAL holds (mxFrame of its header) and how many of them a checkpoint has
// copied into the database (nBackfill of the checkpoint information that
// follows the two header copies); https://www.sqlite.org/walformat.html.
// The WAL index is shared memory, in the machine's byte order.
func (c *checkpointer) walState() (frames, copied int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shm == nil {
		f, err := os.Open(c.shmPath)
		if err != nil {
			return 0, 0, false
		}
		c.shm = f
	}
	var b [walHeaderSize + 4]byte
	if n, err := c.shm.ReadAt(b[:], 0); err != nil || n != len(b) {
		return 0, 0, false
	}
	if b[12] == 0 { // isInit
		return 0, 0, false
	}
	frames = int(binary.NativeEndian.Uint32(b[16:]))
	copied = int(binary.NativeEndian.Uint32(b[walHeaderSize:]))
	return frames, copied, copied <= frames
}

// close stops the goroutine, once a checkpoint under way ends (SQLite's
// cannot be interrupted), and releases its connection. The last connection
// to close, the Store's writer, copies what is left of the WAL into the
// database and removes it.
func (c *checkpointer) close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
	c.mu.Lock()
	if c.shm != nil {
		c.shm.Close()
		c.shm = nil
	}
	c.mu.Unlock()
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("checkpointer: %w", err)
	}
	return nil
}
