package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// smallCheckpoints makes the checkpointer and the writer checkpoint every
// few pages, so that a test of a few hundred writes sees many of each.
func smallCheckpoints(o *options) { o.checkpoint, o.walLimit = 20, 80 }

// walFrameSize is a WAL frame at the default page size.
const walFrameSize = 24 + 4096

// Sustained writes from several writers, with readers alongside, keep the
// WAL near the writer's checkpoint threshold: the checkpointer copies it
// into the database and the WAL restarts from its beginning.
func TestCheckpointsKeepTheWALBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := Open(t.Context(), path, smallCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const writers, each = 8, 40
	var wg sync.WaitGroup
	stop, readerDone := make(chan struct{}), make(chan struct{})
	go func() { // a reader alongside, ended before the store closes
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.GetInstancesBrief(context.Background(), []string{flag(1).ID}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Update(context.Background(), create(w*each+i+1, false)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone
	got, err := s.GetInstancesBrief(t.Context(), []string{flag(1).ID, flag(writers * each).ID})
	if err != nil || len(got) != 2 {
		t.Fatalf("instances after the writes = %d, %v; want 2", len(got), err)
	}
	if s.ckpt != nil && (s.ckpt.passive.Load() == 0 || s.ckpt.restarts.Load() == 0) {
		t.Errorf("checkpoints: %d passive, %d restarts; want some of each", s.ckpt.passive.Load(), s.ckpt.restarts.Load())
	}
	// The WAL file keeps the largest size it had. 320 creates write
	// thousands of frames (with SQLite's autocheckpoint alone, alongside
	// the reader, the WAL grew to 13 MB); the bound is the limit plus the
	// frames of the commit that reached it.
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if limit := int64(80+200) * walFrameSize; fi.Size() > limit {
		t.Errorf("WAL is %d bytes, want at most %d", fi.Size(), limit)
	}
}

// A reader that keeps an old snapshot keeps the WAL from restarting: the
// writer's RESTART gives up after the busy timeout and is tried again once
// the WAL has grown by the limit again, and succeeds once the reader is
// gone.
//
// The writer's RESTART that gives up says so in the log it is given
// (cairn serve's JSON lines), naming the database, not through the
// process's default logger.
func TestAPinnedWALRestartsOnceTheReaderIsGone(t *testing.T) {
	var logged bytes.Buffer
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := Open(t.Context(), path, smallCheckpoints, WithBusyTimeout(50*time.Millisecond),
		WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	write := func() {
		t.Helper()
		n++
		if err := s.Update(t.Context(), create(n, false)); err != nil {
			t.Fatal(err)
		}
	}
	frames := func() int {
		f, _, ok := s.ckpt.walState()
		if !ok {
			t.Fatal("the WAL index cannot be read")
		}
		return f
	}
	write()
	// Those before the reader (Open's migrations write enough frames for
	// the first write to restart the WAL) do not count.
	before := s.ckpt.restarts.Load()
	pin, err := s.r.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pin.QueryRow(`SELECT id FROM instances`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for frames() < 3*80 {
		write()
	}
	tried := s.ckpt.restarts.Load() - before
	if tried == 0 {
		t.Fatal("no RESTART was tried past the limit")
	}
	if tried > 3 {
		t.Errorf("%d RESTARTs tried while the reader kept the WAL, want one per limit's growth", tried)
	}
	if err := pin.Rollback(); err != nil {
		t.Fatal(err)
	}
	var line struct{ Level, Msg, Path string }
	if err := json.Unmarshal(bytes.SplitN(logged.Bytes(), []byte("\n"), 2)[0], &line); err != nil {
		t.Fatalf("log %q: want JSON lines: %v", logged.String(), err)
	}
	if line.Level != "WARN" || !strings.Contains(line.Msg, "could not be restarted") || line.Path != path {
		t.Errorf("first log line %+v; want the WARN that the WAL could not be restarted, with path %s", line, path)
	}
	for start := n; frames() >= 80; {
		if n-start > 200 {
			t.Fatalf("the WAL still holds %d frames %d writes after the reader ended", frames(), n-start)
		}
		write()
	}
}

// childEnv names the database a child process of TestWritesSurviveAKill
// writes to.
const childEnv = "CAIRN_SQLITE_KILL_CHILD"

// Every write acknowledged before the process is killed (no Close, no
// final checkpoint, possibly in the middle of one) is there on reopen.
func TestWritesSurviveAKill(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		writeUntilKilled(path)
		return
	}
	path := filepath.Join(t.TempDir(), "cairn.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWritesSurviveAKill$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints "w n" once writer w's n-th create is acknowledged.
	acked := map[int]int{}
	total := 0
	lines := bufio.NewScanner(out)
	for total < 400 && lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 2 {
			continue
		}
		w, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[1])
		acked[w] = n
		total++
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if total < 400 {
		t.Fatalf("the child acknowledged %d writes before it ended, want 400", total)
	}

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for w, last := range acked {
		ids := make([]string, last)
		for n := 1; n <= last; n++ {
			ids[n-1] = flag(w*100000 + n).ID
		}
		got, err := s.GetInstancesBrief(t.Context(), ids)
		if err != nil || len(got) != last {
			t.Errorf("writer %d: %d of its %d acknowledged instances after the kill (%v)", w, len(got), last, err)
		}
		var v [][]byte
		err = s.view(t.Context(), func(r reader) error {
			for _, id := range ids {
				b, err := r.Value(t.Context(), id, 1)
				if err != nil {
					return err
				}
				v = append(v, b)
			}
			return nil
		})
		if err != nil || len(v) != last {
			t.Errorf("writer %d: values after the kill: %d, %v", w, len(v), err)
		}
	}
}

// writeUntilKilled is the child: four writers create instances (each with
// its value) and print each acknowledged one, with checkpoints every few
// pages, until the test kills the process.
func writeUntilKilled(path string) {
	s, err := Open(context.Background(), path, smallCheckpoints)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := 1; ; n++ {
				if err := s.Update(context.Background(), create(w*100000+n, false)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "%d %d\n", w, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

var _ store.Store = (*Store)(nil)

// Compact empties the WAL while the checkpointer works beside the writes
// (its checkpoint would otherwise hold the lock Compact needs).
func TestCompactEmptiesTheWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	s, err := Open(t.Context(), path, smallCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for n := 1; n <= 100; n++ {
		if err := s.Update(t.Context(), create(n, false)); err != nil {
			t.Fatal(err)
		}
		if n%25 != 0 {
			continue
		}
		if err := s.Compact(t.Context()); err != nil {
			t.Fatalf("Compact after %d writes: %v", n, err)
		}
		if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != 0 {
			t.Fatalf("WAL after Compact: %v, %v; want empty", fi.Size(), err)
		}
	}
}
