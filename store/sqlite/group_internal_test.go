package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

func groupStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func flag(n int) cairn.Instance {
	now := time.Now()
	return cairn.Instance{
		ID:        fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		TypeRef:   cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"},
		Namespace: "default",
		Name:      fmt.Sprintf("f%05d", n),
		Labels:    map[string]string{"team": fmt.Sprintf("t%d", n%10)},
		Backend:   cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		CreatedAt: now,
		Latest:    cairn.ResourceVersion{ResourceVersion: 1, CreatedBy: "test", CreatedAt: now},
	}
}

// create is a write that creates instance n and stores its value, then
// fails when fail is set: the failure must take back both.
func create(n int, fail bool) func(ctx context.Context, tx store.Tx) error {
	return func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, flag(n)); err != nil {
			return err
		}
		if err := tx.PutValue(ctx, flag(n).ID, 1, []byte(`{"enabled":true}`)); err != nil {
			return err
		}
		if fail {
			return fmt.Errorf("write %d refused", n)
		}
		return nil
	}
}

// holdWriter runs an Update that keeps the writer until release is
// closed, and waits until it has it.
func holdWriter(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	started, unblock, res := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		res <- s.Update(context.Background(), func(ctx context.Context, tx store.Tx) error {
			close(started)
			<-unblock
			return tx.CreateInstance(ctx, flag(0))
		})
	}()
	<-started
	return func() { close(unblock) }, res
}

// waitQueued waits until n writes queue behind the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.commit.mu.Lock()
		q := len(s.commit.queue)
		s.commit.mu.Unlock()
		if q == n {
			return
		}
	}
	t.Fatalf("%d writes did not queue", n)
}

// Writes that queue behind the writer share one transaction; each is
// acknowledged or refused on its own: a refused write leaves nothing, a
// panicking one panics in its own caller, a caller gone before its turn is
// not written, and the others commit.
func TestGroupCommitKeepsEachWriteAtomic(t *testing.T) {
	s := groupStore(t)
	ctx := context.Background()
	release, first := holdWriter(t, s)

	const n = 12
	errs := make([]error, n+1)
	panics := make([]any, n+1)
	gone, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wctx, fn := ctx, create(i, i%4 == 0) // 4, 8, 12 refused
		switch i {
		case 6:
			inner := fn
			fn = func(ctx context.Context, tx store.Tx) error {
				if err := inner(ctx, tx); err != nil {
					return err
				}
				panic("write 6 panics")
			}
		case 9:
			wctx = gone
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panics[i] = recover() }()
			errs[i] = s.Update(wctx, fn)
		}()
		waitQueued(t, s, i) // one at a time: the group's order is known
	}
	cancel()
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("the first write: %v", err)
	}

	for i := 1; i <= n; i++ {
		_, getErr := s.GetInstanceByName(ctx, "io.flipt.flag", "default", flag(i).Name)
		switch {
		case i%4 == 0:
			if errs[i] == nil || errs[i].Error() != fmt.Sprintf("write %d refused", i) {
				t.Errorf("write %d: got %v, want its own error", i, errs[i])
			}
			if !cairn.HasCode(getErr, cairn.CodeNotFound) {
				t.Errorf("refused write %d left its instance: %v", i, getErr)
			}
		case i == 6:
			if panics[i] != "write 6 panics" {
				t.Errorf("write 6: recovered %v, want its panic", panics[i])
			}
			if !cairn.HasCode(getErr, cairn.CodeNotFound) {
				t.Errorf("panicking write 6 left its instance: %v", getErr)
			}
		case i == 9:
			if !errors.Is(errs[i], context.Canceled) {
				t.Errorf("write 9 of a caller gone: got %v, want context.Canceled", errs[i])
			}
			if !cairn.HasCode(getErr, cairn.CodeNotFound) {
				t.Errorf("write 9 of a caller gone was written: %v", getErr)
			}
		default:
			if errs[i] != nil || panics[i] != nil {
				t.Errorf("write %d: %v %v", i, errs[i], panics[i])
			}
			if getErr != nil {
				t.Errorf("acknowledged write %d is not there: %v", i, getErr)
			}
			v, err := s.Value(ctx, flag(i).ID, 1)
			if err != nil || string(v) != `{"enabled":true}` {
				t.Errorf("value of write %d: %s, %v", i, v, err)
			}
		}
	}
	// Every committed write has its own change in the log.
	changes, err := s.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + 7; len(changes) != want {
		t.Errorf("%d changes logged, want %d (the first write and 7 of the group)", len(changes), want)
	}
	// ... and carries that change's Seq.
	for _, c := range changes {
		in, err := s.GetInstances(ctx, []string{c.InstanceID})
		if err != nil || len(in) != 1 || in[0].Seq != c.Seq || c.Kind != store.Added {
			t.Errorf("change %d (%s %s): instance %v, %v; want one ADDED with that Seq", c.Seq, c.Kind, c.InstanceID, in, err)
		}
	}
	// The writer is free again: a lone write goes through.
	if err := s.Update(ctx, create(100, false)); err != nil {
		t.Fatal(err)
	}
}

// The first write of a group's transaction runs without a savepoint: when
// it fails (or panics, or its caller is gone), the transaction is rolled
// back whole and the next write begins another, so the writes after it
// commit and the failed ones leave nothing, wherever they are in the group.
func TestGroupCommitFailedFirstWrites(t *testing.T) {
	for _, outcomes := range []string{"fok", "pfok", "cfok", "ffff", "okfo", "fpcfokf"} {
		t.Run(outcomes, func(t *testing.T) {
			s := groupStore(t)
			ctx := context.Background()
			release, first := holdWriter(t, s)
			n := len(outcomes)
			errs, panics := make([]error, n), make([]any, n)
			gone, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for i, o := range outcomes {
				wctx, fn := ctx, create(i+1, o == 'f')
				switch o {
				case 'p':
					fn = func(ctx context.Context, tx store.Tx) error {
						if err := create(i+1, false)(ctx, tx); err != nil {
							return err
						}
						panic("write panics")
					}
				case 'c':
					wctx = gone
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { panics[i] = recover() }()
					errs[i] = s.Update(wctx, fn)
				}()
				waitQueued(t, s, i+1)
			}
			cancel()
			release()
			wg.Wait()
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			committed := 1 // the writer held
			for i, o := range outcomes {
				_, getErr := s.GetInstanceByName(ctx, "io.flipt.flag", "default", flag(i+1).Name)
				if o == 'o' || o == 'k' {
					committed++
					if errs[i] != nil || panics[i] != nil || getErr != nil {
						t.Errorf("write %d (%c): %v, %v, then %v", i+1, o, errs[i], panics[i], getErr)
					}
					continue
				}
				if (errs[i] == nil && panics[i] == nil) || !cairn.HasCode(getErr, cairn.CodeNotFound) {
					t.Errorf("write %d (%c): %v, %v, and its instance: %v", i+1, o, errs[i], panics[i], getErr)
				}
			}
			changes, err := s.Changes(ctx, 0, 100)
			if err != nil || len(changes) != committed {
				t.Errorf("changes %v, %v; want %d", changes, err, committed)
			}
		})
	}
}

// A lone write, like a write of a group, is not run when its caller's
// context has ended before it begins, and once begun it runs to its end
// and commits, also when the context ends meanwhile.
func TestLoneWriteRunsToItsEnd(t *testing.T) {
	s := groupStore(t)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Update(gone, create(1, false)); !errors.Is(err, context.Canceled) {
		t.Fatalf("write of a caller gone: %v, want context.Canceled", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateInstance(ctx, flag(2)); err != nil {
			return err
		}
		cancel() // the caller goes away halfway
		return tx.PutValue(ctx, flag(2).ID, 1, []byte(`{"enabled":true}`))
	})
	if err != nil {
		t.Fatalf("write whose caller went away halfway: %v", err)
	}
	for i, want := range []bool{false, true} {
		_, err := s.GetInstanceByName(context.Background(), "io.flipt.flag", "default", flag(i+1).Name)
		if (err == nil) != want {
			t.Errorf("instance of write %d: %v, want it there: %v", i+1, err, want)
		}
	}
	if v, err := s.Value(context.Background(), flag(2).ID, 1); err != nil || string(v) != `{"enabled":true}` {
		t.Errorf("value of write 2: %s, %v", v, err)
	}
}

// Two writes of one group that take the same name: the second is refused
// with the store's own error, as if it had come after the first committed.
func TestGroupCommitSeesEarlierWritesOfTheGroup(t *testing.T) {
	s := groupStore(t)
	release, first := holdWriter(t, s)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), func(ctx context.Context, tx store.Tx) error {
				in := flag(1)
				in.ID = fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
				return tx.CreateInstance(ctx, in)
			})
		}()
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !cairn.HasCode(errs[1], cairn.CodeAlreadyExists) {
		t.Fatalf("got %v and %v, want nil and AlreadyExists", errs[0], errs[1])
	}
}

// BenchmarkConcurrentCreates: 16 writers creating instances, each write its
// own transaction (max 1, the baseline) against group commit.
func BenchmarkConcurrentCreates(b *testing.B) {
	for _, bc := range []struct {
		name string
		max  int
	}{{"alone", 1}, {"group", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			s := groupStore(b)
			s.commit.max = bc.max
			var next sync.Mutex
			n := 0
			b.SetParallelism(8) // 16 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					next.Lock()
					n++
					i := n
					next.Unlock()
					if err := s.Update(context.Background(), create(i, false)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// hubCreate is the transaction the hub runs for one REST create of a Flag
// (hub.storeCreates): check the Type is the one the value was checked
// against, create the instance, store its value, relate it to the
// built-in backend, read the Seq of its change.
func hubCreate(id string, n int) func(ctx context.Context, tx store.Tx) error {
	return func(ctx context.Context, tx store.Tx) error {
		in := flag(n)
		in.ID = id
		ok, err := tx.(store.TypeMatcher).TypeMatches(ctx, in.TypeRef, nil, false)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("type %s does not match", in.TypeRef)
		}
		if err := tx.CreateInstance(ctx, in); err != nil {
			return err
		}
		if err := tx.PutValue(ctx, id, 1, []byte(`{"enabled":true}`)); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, id, cairn.BuiltinBackendID); err != nil {
			return err
		}
		_, err = tx.LastSeq(ctx)
		return err
	}
}

// hubStore is a store with the Flag Type and the built-in backend's
// instance that hubCreate needs, and 1,000 Flags already.
func hubStore(b *testing.B, newID func() string, opts ...Option) *Store {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "cairn.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	err = s.Update(b.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.CreateType(ctx, cairn.Type{Path: flag(0).TypeRef.Path, Revision: flag(0).TypeRef.Revision}); err != nil {
			return err
		}
		backend := flag(0)
		backend.ID, backend.Name = cairn.BuiltinBackendID, "builtin"
		if err := tx.CreateInstance(ctx, backend); err != nil {
			return err
		}
		for i := range 1000 {
			if err := hubCreate(newID(), -1-i)(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkHubCreates runs the hub's create transaction from 16 writers,
// with random (UUIDv4, the baseline) and time-ordered (UUIDv7, what the
// hub makes) instance ids: v7 ids land on the last page of every index
// keyed by instance id, so a group commit writes fewer pages.
func BenchmarkHubCreates(b *testing.B) {
	for _, bc := range []struct {
		name  string
		newID func() string
	}{
		{"ids=v4", uuid.NewString},
		{"ids=v7", func() string { return uuid.Must(uuid.NewV7()).String() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := hubStore(b, bc.newID)
			var next atomic.Int64
			b.SetParallelism(8) // 16 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(next.Add(1))
					if err := s.Update(context.Background(), hubCreate(bc.newID(), n)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCheckpoints runs BenchmarkHubCreates' transaction from 16
// writers with SQLite's own checkpoints inside the committing writer (the
// baseline) and with the checkpointer's, off the write path.
func BenchmarkCheckpoints(b *testing.B) {
	for _, bc := range []struct {
		name       string
		checkpoint int
	}{{"in-writer", 0}, {"background", checkpointPages}} {
		b.Run(bc.name, func(b *testing.B) {
			newID := func() string { return uuid.Must(uuid.NewV7()).String() }
			s := hubStore(b, newID, func(o *options) { o.checkpoint = bc.checkpoint })
			var next atomic.Int64
			b.SetParallelism(8) // 16 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(next.Add(1))
					if err := s.Update(context.Background(), hubCreate(newID(), n)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGroupCommit runs groups of a fixed size of the hub's create
// transaction through runGroup, one group after another: the writer's
// serial section per create, which bounds the create rate, without the
// scheduling that sizes groups in BenchmarkHubCreates (so callgrind
// counts it repeatably). frames/commit is what a commit appends to the
// WAL: a page per table and index it touched, and splits; cpu-ns/create
// the process's user and system CPU time per create (checkpoints
// included), steadier than ns/create on a shared machine.
func BenchmarkGroupCommit(b *testing.B) {
	for _, size := range []int{1, 3, 6, 16} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			newID := func() string { return uuid.Must(uuid.NewV7()).String() }
			s := hubStore(b, newID)
			n, frames, commits := 0, 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				group := createGroup(b, size, newID, &n)
				before, _, _ := s.ckpt.walState()
				s.runGroup(group)
				after, _, _ := s.ckpt.walState()
				if after < before {
					before = 0 // the transaction restarted the WAL before writing to it
				}
				frames += after - before
				commits++
				s.ckpt.committed(s.w)
				for _, op := range group {
					if op.err != nil {
						b.Fatal(op.err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/create")
			b.ReportMetric(float64(frames)/float64(commits), "frames/commit")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/create")
		})
	}
}

// createGroup is a group of size of the hub's create transaction, the
// instances numbered on from *n.
func createGroup(b *testing.B, size int, newID func() string, n *int) []*writeOp {
	group := make([]*writeOp, size)
	for i := range group {
		*n++
		group[i] = &writeOp{ctx: b.Context(), fn: hubCreate(newID(), *n), done: make(chan struct{})}
	}
	return group
}

// commitGroup runs group as the writer runs a group, lets the
// checkpointer see the commit, and fails b on any write's error.
func commitGroup(b *testing.B, s *Store, group []*writeOp) {
	b.Helper()
	s.runGroup(group)
	s.ckpt.committed(s.w)
	for _, op := range group {
		if op.err != nil {
			b.Fatal(op.err)
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitGathering waits until a writer that found the writer idle waits
// for others (gather).
func waitGathering(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.commit.mu.Lock()
		g := s.commit.gathering
		s.commit.mu.Unlock()
		if g {
			return
		}
	}
	t.Fatal("no writer waits for others")
}

// txOf records which SQLite transaction each write succeeded in last (a
// group with a failed write runs the others again in another).
func txOf(seen *sync.Map, key int, fn func(ctx context.Context, tx store.Tx) error) func(ctx context.Context, tx store.Tx) error {
	return func(ctx context.Context, stx store.Tx) error {
		err := fn(ctx, stx)
		if err == nil {
			seen.Store(key, stx.(*tx).reader.tx)
		}
		return err
	}
}

// After a transaction of several writes, the next write to find the
// writer idle waits for as many others and commits them in one
// transaction with its own; each is still acknowledged or refused on its
// own. A write whose predecessor ran alone does not wait.
func TestGatherTheNextWave(t *testing.T) {
	s := groupStore(t)
	s.commit.wait = time.Hour // the wave ends the wait, not the timer
	var seen sync.Map
	// A wave of three: queued behind a held writer, committed together.
	release, first := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(context.Background(), create(i+1, false)); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}

	// The next wave: its first write waits until two more queued.
	errs := make([]error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = s.Update(context.Background(), txOf(&seen, 0, create(10, false)))
	}()
	waitGathering(t, s)
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), txOf(&seen, i, create(10+i, i == 1)))
		}()
		if i == 1 {
			waitQueued(t, s, 1)
		}
	}
	wg.Wait()
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("the wave's writes: %v", errs)
	}
	tx0, _ := seen.Load(0)
	if tx2, _ := seen.Load(2); tx0 == nil || tx2 != tx0 {
		t.Errorf("write 2 committed in another transaction than the wave's first")
	}
	got, err := s.GetInstances(context.Background(), []string{flag(10).ID, flag(11).ID, flag(12).ID})
	if err != nil || len(got) != 2 || got[0].ID != flag(10).ID || got[1].ID != flag(12).ID {
		t.Fatalf("after the wave: %v, %v; want instances 10 and 12", got, err)
	}

	// The first write after a wave that comes alone waits for others
	// (briefly here) and runs alone; writes one at a time after it do not
	// wait (the wait is an hour again).
	s.commit.mu.Lock()
	s.commit.wait = time.Millisecond
	s.commit.mu.Unlock()
	if err := s.Update(context.Background(), create(19, false)); err != nil {
		t.Fatal(err)
	}
	s.commit.mu.Lock()
	s.commit.wait = time.Hour
	s.commit.mu.Unlock()
	done := make(chan error)
	go func() {
		for i := range 5 {
			if err := s.Update(context.Background(), create(20+i, false)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("writes one at a time waited for others")
	}
}

// BenchmarkGather: 16 writers that each spend about 100 µs of CPU
// between their creates (what a REST create costs above the store), the
// first write of a wave committing alone (the baseline) against it
// waiting for the wave. cpu-ns/create is the process's CPU time per
// create; wal-frames/create what the commits wrote.
func BenchmarkGather(b *testing.B) {
	for _, bc := range []struct {
		name string
		wait time.Duration
	}{{"alone", -1}, {"gather", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			newID := func() string { return uuid.Must(uuid.NewV7()).String() }
			s := hubStore(b, newID)
			s.commit.wait = bc.wait
			var next atomic.Int64
			b.SetParallelism(8) // 16 writers on 2 cores
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					spin(100 * time.Microsecond)
					n := int(next.Add(1))
					if err := s.Update(context.Background(), hubCreate(newID(), n)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/create")
		})
	}
}

// spin keeps the CPU busy for about d of its time.
func spin(d time.Duration) {
	x := 0
	for start := time.Now(); time.Since(start) < d; {
		for i := range 1000 {
			x += i
		}
	}
	_ = x
}

// AfterCommit's functions run once their write has committed (a read
// through another store on the file sees it), in a group only for the
// writes the commit holds, and never for a refused write.
func TestAfterCommit(t *testing.T) {
	ctx := t.Context()
	s, other := twoStores(t)
	var mu sync.Mutex
	ran := map[int]bool{}
	// hooked is create(n, fail) telling ran[n] after its commit, which it
	// checks through the other store.
	hooked := func(n int, fail bool) func(ctx context.Context, tx store.Tx) error {
		return func(ctx context.Context, stx store.Tx) error {
			if !stx.(store.AfterCommitter).AfterCommit(func() {
				if got, err := other.GetInstances(context.Background(), []string{flag(n).ID}); err != nil || len(got) != 1 {
					t.Errorf("write %d: not committed when its function runs: %v, %v", n, got, err)
				}
				mu.Lock()
				ran[n] = true
				mu.Unlock()
			}) {
				t.Error("AfterCommit refused")
			}
			return create(n, fail)(ctx, stx)
		}
	}
	if err := s.Update(ctx, hooked(1, false)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, hooked(2, true)); err == nil {
		t.Fatal("write 2 not refused")
	}
	// A group: the first write refused (a transaction of its own, rolled
	// back), then a kept, a refused and a kept one.
	release, first := holdWriter(t, s)
	var wg sync.WaitGroup
	for i, n := range []int{3, 4, 5, 6} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Update(context.Background(), hooked(n, n == 3 || n == 5))
		}()
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for n, want := range map[int]bool{1: true, 2: false, 3: false, 4: true, 5: false, 6: true} {
		if ran[n] != want {
			t.Errorf("write %d: function run %v, want %v", n, ran[n], want)
		}
	}
}

// BenchmarkWALVFS runs BenchmarkGroupCommit's groups of 1 and 6 creates
// with the writer's WAL written through SQLite's own VFS (plain: a write
// per frame header and per page) and through walvfs.go's (a write per
// transaction), alternating, each reporting the process's CPU per create.
func BenchmarkWALVFS(b *testing.B) {
	for _, size := range []int{1, 6} {
		for _, plain := range []bool{true, false} {
			name := map[bool]string{true: "plain", false: "cairn-wal"}[plain]
			b.Run(fmt.Sprintf("size=%d/%s", size, name), func(b *testing.B) {
				newID := func() string { return uuid.Must(uuid.NewV7()).String() }
				s := hubStore(b, newID, func(o *options) { o.plainWAL = plain })
				n := 0
				cpu0 := cpuTime()
				for b.Loop() {
					commitGroup(b, s, createGroup(b, size, newID, &n))
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/create")
			})
		}
	}
}
