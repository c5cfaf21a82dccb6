package git_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// serveGated serves the bare repository over smart HTTP, holding the
// first push after arm is called until release is: a write is then under
// way for as long as the test needs writers to queue behind it.
func serveGated(t *testing.T, r *gittest.Remote) (url string, arm func(), arrived <-chan struct{}, release func()) {
	t.Helper()
	var armed atomic.Bool
	in := make(chan struct{}, 1)
	out := make(chan struct{})
	url = r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") && armed.CompareAndSwap(true, false) {
				in <- struct{}{}
				<-out
			}
			h.ServeHTTP(w, req)
		})
	})
	var once sync.Once
	rel := func() { once.Do(func() { close(out) }) }
	t.Cleanup(rel)
	return url, func() { armed.Store(true) }, in, rel
}

func groupBackend(t testing.TB, url string) *git.Backend {
	t.Helper()
	return gittest.Open(t, url, map[string]any{"groupCommit": true}, nil)
}

// waitQueued waits until n writers queue for a group commit.
func waitQueued(t *testing.T, b *git.Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.QueuedWrites() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writers queued, want %d", b.QueuedWrites(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestGroupCommit: while one write is being pushed, eight more queue; they
// are written together as the next commit, and each caller gets its own
// answer: seven creates succeed, an update of a resource version that
// exists fails with AlreadyExists and is left out. Another process reads
// every grouped create.
func TestGroupCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	url, arm, arrived, release := serveGated(t, r)
	b := groupBackend(t, url)
	ctx := t.Context()
	taken := uuid.NewString()
	c1 := create(t, ctx, b, taken, "taken", `{"v":1}`)
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: taken, NewResourceVersion: 2, NewValue: json.RawMessage(`{"v":2}`), Context: c1}); err != nil {
		t.Fatal(err)
	}
	before := r.Commits(t)

	arm()
	firstErr := make(chan error, 1)
	go func() {
		_, err := b.OnCreate(cairn.WithResourceMeta(cairn.WithActor(ctx, "w0"), flagMeta("first", nil)),
			cairn.OnCreateRequest{InstanceID: "first", Value: json.RawMessage(`{}`)})
		firstErr <- err
	}()
	<-arrived // the first write is being pushed
	const n = 7
	errs := make([]error, n+1)
	ctxs := make([]json.RawMessage, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("g%d", i)
			wctx := cairn.WithResourceMeta(cairn.WithActor(ctx, fmt.Sprintf("w%d", i+1)), flagMeta(name, nil))
			ctxs[i], errs[i] = b.OnCreate(wctx, cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		})
	}
	wg.Go(func() {
		_, errs[n] = b.OnUpdate(cairn.WithActor(ctx, "late"), cairn.OnUpdateRequest{InstanceID: taken, NewResourceVersion: 2, NewValue: json.RawMessage(`{"v":"again"}`), Context: c1})
	})
	waitQueued(t, b, n+1)
	release()
	wg.Wait()
	if err := <-firstErr; err != nil {
		t.Fatalf("the first write: %v", err)
	}
	for i, err := range errs[:n] {
		if err != nil {
			t.Errorf("create g%d: %v", i, err)
		}
	}
	if !cairn.HasCode(errs[n], cairn.CodeAlreadyExists) {
		t.Errorf("the update of a taken resource version = %v, want AlreadyExists", errs[n])
	}
	if got := r.Commits(t); got != before+2 {
		t.Fatalf("%d commits for 1+8 writes, want 2 (the first, then one group)", got-before)
	}
	msg := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main")
	if c := strings.Count(msg, "Cairn-Change: create g"); c != n {
		t.Errorf("the group commit has %d creates, want %d:\n%s", c, n, msg)
	}
	for i := range n {
		if !strings.Contains(msg+"\n", fmt.Sprintf("Cairn-Actor: w%d\n", i+1)) || !strings.Contains(msg, fmt.Sprintf("production/g%d (resource version 1) by w%d", i, i+1)) {
			t.Errorf("the group commit does not name w%d as g%d's writer:\n%s", i+1, i, msg)
		}
	}
	if strings.Contains(msg, "late") || strings.Contains(msg, taken) {
		t.Errorf("the refused update is in the group commit:\n%s", msg)
	}
	head := gittest.Git(t, r.Path, "rev-parse", "main")
	other := gittest.NewBackend(t, r.FileURL())
	for i := range n {
		var vc struct{ Commit string }
		if err := json.Unmarshal(ctxs[i], &vc); err != nil || vc.Commit != head {
			t.Errorf("g%d: context %s, want the group commit", i, ctxs[i])
		}
		v, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: fmt.Sprintf("g%d", i), ResourceVersion: 1})
		if err != nil || string(v) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("another process reads g%d as %s, %v", i, v, err)
		}
	}
	if v, err := other.GetValue(ctx, cairn.GetValueRequest{InstanceID: taken, ResourceVersion: 2}); err != nil || string(v) != `{"v":2}` {
		t.Errorf("version 2 of the taken resource = %s, %v", v, err)
	}
}

// TestGroupCommitOfRequests: the hub hands a Git backend each request's
// writes as a batch (OnBatch), a REST create being a batch of one; those
// group as OnCreate does. Before, OnBatch went around the queue and 30
// concurrent REST creates made 30 commits. Undoing one request's batch
// takes back its own change only, not the others of the group commit.
func TestGroupCommitOfRequests(t *testing.T) {
	r := gittest.NewRemote(t)
	url, arm, arrived, release := serveGated(t, r)
	b := groupBackend(t, url)
	ctx := t.Context()
	one := func(actor, name string) (cairn.BatchWrite, context.Context) {
		m := flagMeta(name, nil)
		return cairn.BatchWrite{Meta: &m, Create: &cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(`{}`)}}, cairn.WithActor(ctx, actor)
	}
	create(t, ctx, b, "seed", "seed", `{}`)
	before := r.Commits(t)
	arm()
	firstErr := make(chan error, 1)
	go func() {
		w, wctx := one("w0", "first")
		_, err := b.OnBatch(wctx, []cairn.BatchWrite{w})
		firstErr <- err
	}()
	<-arrived
	const n = 5
	writes := make([]cairn.BatchWrite, n)
	res := make([]cairn.BatchResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		var wctx context.Context
		writes[i], wctx = one(fmt.Sprintf("w%d", i+1), fmt.Sprintf("r%d", i))
		wg.Go(func() { res[i], errs[i] = b.OnBatch(wctx, []cairn.BatchWrite{writes[i]}) })
	}
	waitQueued(t, b, n)
	release()
	wg.Wait()
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	head := gittest.Git(t, r.Path, "rev-parse", "main")
	for i, err := range errs {
		if err != nil || res[i].Token != head {
			t.Fatalf("request %d: token %q, %v; want the group commit %s", i, res[i].Token, err, head)
		}
	}
	if got := r.Commits(t); got != before+2 {
		t.Fatalf("%d commits for 1+%d one-write requests, want 2", got-before, n)
	}
	if err := b.UndoBatch(cairn.WithActor(ctx, "w1"), writes[:1], res[0]); err != nil {
		t.Fatal(err)
	}
	files := gittest.Git(t, r.Path, "ls-tree", "--name-only", "-r", "main")
	if strings.Contains(files, "Flag-r0.json") || !strings.Contains(files, "Flag-r1.json") || !strings.Contains(files, "Flag-first.json") {
		t.Errorf("after undoing r0's request the tree holds:\n%s", files)
	}
}

// TestGroupCommitCancelledWhileQueued: a writer whose context ends while
// it waits in the queue gets the context's error, and its change is not
// committed.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	r := gittest.NewRemote(t)
	url, arm, arrived, release := serveGated(t, r)
	b := groupBackend(t, url)
	ctx := t.Context()
	arm()
	firstErr := make(chan error, 1)
	go func() {
		_, err := b.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("first", nil)), cairn.OnCreateRequest{InstanceID: "first", Value: json.RawMessage(`{}`)})
		firstErr <- err
	}()
	<-arrived
	qctx, cancel := context.WithCancel(ctx)
	queuedErr := make(chan error, 1)
	go func() {
		_, err := b.OnCreate(cairn.WithResourceMeta(qctx, flagMeta("cancelled", nil)), cairn.OnCreateRequest{InstanceID: "cancelled", Value: json.RawMessage(`{}`)})
		queuedErr <- err
	}()
	waitQueued(t, b, 1)
	cancel()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled writer got %v, want context.Canceled", err)
	}
	release()
	if err := <-firstErr; err != nil {
		t.Fatalf("the first write: %v", err)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); files != flagPath("first") {
		t.Errorf("files on main:\n%s\nwant only %s", files, flagPath("first"))
	}
	if n := b.QueuedWrites(); n != 0 {
		t.Errorf("%d writers left in the queue", n)
	}
}

// BenchmarkGroupCommit: rounds of 8 concurrent creates on one backend,
// without group commit (each waits for the others' commit and push) and
// with it, alternated in the same run on file:// remotes; speedup is the
// time of a serial round over a grouped one.
func BenchmarkGroupCommit(b *testing.B) {
	const writers = 8
	serial := gittest.NewBackend(b, gittest.NewRemote(b).FileURL())
	grouped := groupBackend(b, gittest.NewRemote(b).FileURL())
	ctx := b.Context()
	var n atomic.Int64
	round := func(bk *git.Backend) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				name := fmt.Sprintf("c%d", n.Add(1))
				if _, err := bk.OnCreate(cairn.WithResourceMeta(ctx, flagMeta(name, nil)), cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(`{}`)}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	round(serial) // open both caches outside the measurement
	round(grouped)
	var ts, tg time.Duration
	b.ResetTimer()
	for range b.N {
		ts += round(serial)
		tg += round(grouped)
	}
	b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "serial-ns/round")
	b.ReportMetric(float64(tg.Nanoseconds())/float64(b.N), "grouped-ns/round")
	b.ReportMetric(float64(ts)/float64(tg), "speedup")
}

// BenchmarkWriters is acknowledged writes per second with 1 and 16
// concurrent writers (creates) on one group-committing backend on a file://
// bare repository; scripts/bench prints its writes/s.
func BenchmarkWriters(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			bk := groupBackend(b, gittest.NewRemote(b).FileURL())
			ctx := b.Context()
			var n atomic.Int64
			create := func() {
				name := fmt.Sprintf("w%d", n.Add(1))
				if _, err := bk.OnCreate(cairn.WithResourceMeta(ctx, flagMeta(name, nil)), cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(`{}`)}); err != nil {
					b.Error(err)
				}
			}
			create() // open the cache outside the measurement
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						create()
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}
