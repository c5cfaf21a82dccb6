package gitsync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/controller/gitsync"
)

// newCountingSyncEnv is newSyncEnv on a remote served over HTTP that
// counts the pushes it receives.
func newCountingSyncEnv(t testing.TB) (*syncEnv, *atomic.Int64) {
	r := gittest.NewRemote(t)
	var pushes atomic.Int64
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
				pushes.Add(1)
			}
			h.ServeHTTP(w, req)
		})
	})
	return newSyncEnvWith(t, r, map[string]any{"url": url}, nil), &pushes
}

// writeFlags writes n Flag files named prefix-0000... into Jane's clone.
func (e *syncEnv) writeFlags(prefix string, n int) {
	e.t.Helper()
	dir := filepath.Join(e.clone, "default")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		if err := os.WriteFile(filepath.Join(dir, "flipt.io-v1-Flag-"+name+".json"), []byte(flagFile(name, i%2 == 0)), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestSyncImportsACommitAsOneBatch: Jane pushes one commit of 200 new
// Flags (BenchmarkSyncImport1000 times 1,000), a change to one cairn made
// and a file breaking the schema. The sync imports the 201 good files with
// one hub call: one commit of cairn's, one push, one change each in the
// change log; the broken file is reported with its own error and skipped.
// Syncing again, or from a lost cache, imports nothing and pushes nothing;
// a fresh cache reads the imported values from Jane's commit.
func TestSyncImportsACommitAsOneBatch(t *testing.T) {
	e, pushes := newCountingSyncEnv(t)
	ctx := context.Background()
	changed := e.create("change-me", false)
	s, err := gitsync.NewSyncer(gitsync.SyncConfig{Hub: e.h, Opener: e.opener, BackendID: e.id, MaxEvents: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status") // clones
	e.writeFlags("bulk", 200)
	e.write("change-me", flagFile("change-me", true))
	e.write("broken", flagFile("broken", "yes"))
	e.person("add", "-A")
	e.person("commit", "--quiet", "-m", "200 flags")
	janes := e.person("rev-parse", "HEAD")
	e.person("push", "--quiet", "origin", "main")
	tree := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}")
	commits, pushed := e.remote.Commits(t), pushes.Load()
	seq, err := e.h.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}

	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if res.Created != 200 || res.Updated != 1 || res.Skipped != 1 || res.Deleted != 0 {
		t.Errorf("Sync = %+v, want 200 created, 1 updated, 1 skipped", res)
	}
	if n := e.remote.Commits(t) - commits; n != 1 {
		t.Errorf("the import made %d commits, want 1", n)
	}
	if n := pushes.Load() - pushed; n != 1 {
		t.Errorf("the import pushed %d times, want 1", n)
	}
	if got := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}"); got != tree {
		t.Errorf("the import changed Jane's files")
	}
	msg := gittest.Git(t, e.remote.Path, "log", "-1", "--format=%B", "main")
	if !strings.HasPrefix(msg, "cairn: sync create 200, update 1 resources by "+jane) || !strings.Contains(msg, "Cairn-Source: "+janes) ||
		strings.Count(msg, "Cairn-Change: ") != 201 {
		t.Errorf("the import commit's message does not record the 201 changes of %s:\n%.600s", janes, msg)
	}
	changes, err := e.h.Changes(ctx, seq, 5000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range changes {
		seen[c.Name] = true
	}
	if len(seen) != 201 || !seen["bulk-0199"] || !seen["change-me"] {
		t.Errorf("the change log has %d instances after the import (of %d changes), want 201", len(seen), len(changes))
	}
	var skipped []gitsync.SyncEvent
	for _, ev := range s.Events() {
		if ev.Type == "Skipped" {
			skipped = append(skipped, ev)
		}
	}
	if len(skipped) != 1 || skipped[0].Path != "default/flipt.io-v1-Flag-broken.json" || skipped[0].Commit != janes ||
		!strings.HasPrefix(skipped[0].Reason, "create flipt.io/v1 Flag default/broken: ") || !strings.Contains(skipped[0].Reason, "enabled") {
		t.Errorf("skipped events = %+v, want the broken file with its schema error", skipped)
	}
	inst, err := e.get("bulk-0198")
	if err != nil || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` || inst.Backend.ID != e.id {
		t.Errorf("bulk-0198: %+v, %v; want Jane's enabled Flag in the Git backend", inst.Latest, err)
	}
	if inst, err := e.get("change-me"); err != nil || inst.ID != changed || inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane {
		t.Errorf("change-me: %+v, %v; want version 2 by Jane", inst.Latest, err)
	}
	if _, err := e.get("broken"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("broken was imported: %v", err)
	}

	// Again, then from a restart on the same cache, and from a lost cache:
	// nothing imported, nothing pushed.
	commits, pushed = e.remote.Commits(t), pushes.Load()
	for i, cache := range []string{e.cache, e.cache, t.TempDir()} {
		if i > 0 {
			e.open(cache)
			s = e.syncer()
		}
		res, err := s.Sync(ctx)
		if err != nil || res.Created+res.Updated+res.Deleted != 0 {
			t.Errorf("Sync %d after the import = %+v, %v; want nothing imported", i, res, err)
		}
		if pushes.Load() != pushed || e.remote.Commits(t) != commits {
			t.Errorf("Sync %d after the import pushed %d times", i, pushes.Load()-pushed)
		}
	}
	// The fresh cache's index points the imported versions at Jane's
	// commit.
	if inst, err := e.get("bulk-0001"); err != nil || string(inst.Latest.Value) != `{"enabled":false}` {
		t.Errorf("bulk-0001 read through a fresh cache: %s, %v", inst.Latest.Value, err)
	}
}

// BenchmarkSyncImport1000: the sync of one pushed commit of 1,000 new Flag
// files, over smart HTTP (git http-backend); the set-up (the hub, Jane's
// commit and push) is not timed. It reports the commits and pushes the
// import made (1 each: one batch).
func BenchmarkSyncImport1000(b *testing.B) {
	benchSync(b, func(e *syncEnv, s *gitsync.Syncer) {
		if _, err := s.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		e.person("status")
		e.writeFlags("bulk", 1000)
		e.pushAll("1,000 flags")
	}, func(res gitsync.SyncResult) bool { return res.Created == 1000 })
}

// BenchmarkSyncDelete1000: the sync of one pushed commit removing 1,000
// Flag files, over smart HTTP; the set-up (the hub, the import of the
// 1,000 files, Jane's removal and push) is not timed. It reports the
// commits and pushes the sync made (1 each: one batch).
func BenchmarkSyncDelete1000(b *testing.B) {
	benchSync(b, func(e *syncEnv, s *gitsync.Syncer) {
		e.person("status")
		e.writeFlags("bulk", 1000)
		e.pushAll("1,000 flags")
		if res, err := s.Sync(context.Background()); err != nil || res.Created != 1000 {
			b.Fatalf("Sync of the 1,000 files = %+v, %v", res, err)
		}
		e.person("pull", "--quiet", "--ff-only", "origin", "main")
		e.removeFlags("bulk", 0, 1000)
		e.pushAll("remove 1,000 flags")
	}, func(res gitsync.SyncResult) bool { return res.Deleted == 1000 })
}

// benchSync times one Sync per round on a fresh hub and remote that
// prepare (not timed) has brought to the state to sync, checks its result
// with ok and reports the commits and pushes the sync made.
func benchSync(b *testing.B, prepare func(*syncEnv, *gitsync.Syncer), ok func(gitsync.SyncResult) bool) {
	ctx := context.Background()
	var commits, pushed int64
	for range b.N {
		b.StopTimer()
		e, pushes := newCountingSyncEnv(b)
		e.create("seed", true)
		s := e.syncer()
		prepare(e, s)
		before, p := e.remote.Commits(b), pushes.Load()
		b.StartTimer()
		res, err := s.Sync(ctx)
		b.StopTimer()
		if err != nil || !ok(res) {
			b.Fatalf("Sync = %+v, %v", res, err)
		}
		commits += int64(e.remote.Commits(b) - before)
		pushed += pushes.Load() - p
	}
	b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
	b.ReportMetric(float64(pushed)/float64(b.N), "pushes/op")
}

// TestWebhookAnswersWhileTheSyncGoesOn: a sync slower than the provider's
// delivery timeout (here, the remote holds the fetch) gets the webhook a
// 202 once WebhookWait is over; the sync goes on, and GET shows what it
// did once the remote answers.
func TestWebhookAnswersWhileTheSyncGoesOn(t *testing.T) {
	r := gittest.NewRemote(t)
	var hold atomic.Pointer[chan struct{}]
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if c := hold.Load(); c != nil && strings.HasSuffix(req.URL.Path, "/git-upload-pack") {
				<-*c
			}
			h.ServeHTTP(w, req)
		})
	})
	e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
	e.create("seed", true)
	svc, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: e.h, Opener: e.opener, WebhookWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	e.person("status")
	e.writeFlags("hooked", 3)
	e.pushAll("three flags")

	release := make(chan struct{})
	hold.Store(&release)
	resp, err := http.Post(srv.URL+"/hooks/git/flags-repo", "application/json", strings.NewReader(`{"ref":"refs/heads/main"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"running":true`) {
		t.Fatalf("webhook while the fetch is held: %d %s, want 202 running", resp.StatusCode, body)
	}
	hold.Store(nil)
	close(release)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/hooks/git/flags-repo")
		if err != nil {
			t.Fatal(err)
		}
		var status struct {
			Stats gitsync.SyncStats `json:"stats"`
		}
		err = json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		if err == nil && status.Stats.Created == 3 && status.Stats.LastCommit != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sync the webhook started did not finish: %+v, %v", status.Stats, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the status, bounded by the deadline
	}
	if inst, err := e.get("hooked-0002"); err != nil || inst.Latest.CreatedBy != jane {
		t.Errorf("hooked-0002 after the webhook's sync: %+v, %v", inst.Latest, err)
	}
}

// removeFlags removes Jane's Flag files prefix-from ... prefix-(to-1).
func (e *syncEnv) removeFlags(prefix string, from, to int) {
	e.t.Helper()
	for i := from; i < to; i++ {
		if err := os.Remove(filepath.Join(e.clone, "default", fmt.Sprintf("flipt.io-v1-Flag-%s-%04d.json", prefix, i))); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestSyncDeletesACommitsRemovalsAsOneBatch: Jane removes 20 Flags in one
// commit, then 20 more with a new Flag and a change in another. The
// removals of a commit are one hub call, one commit of cairn's and one
// push (the adds and changes one more of each); a locked Flag among them
// is reported and kept, the others deleted. A fresh cache (another
// replica) agrees and deletes nothing again.
func TestSyncDeletesACommitsRemovalsAsOneBatch(t *testing.T) {
	e, pushes := newCountingSyncEnv(t)
	ctx := context.Background()
	s := e.syncer()
	locked := e.create("locked", false)
	if err := e.h.LockInstances(cairn.WithActor(ctx, "admin"), []string{locked}, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status") // clones
	e.writeFlags("bulk", 40)
	e.pushAll("40 flags")
	if res, err := s.Sync(ctx); err != nil || res.Created != 40 {
		t.Fatalf("Sync of 40 new flags = %+v, %v", res, err)
	}

	for _, tc := range []struct {
		name             string
		change           func()
		deleted, created int
		skipped          int
		commits          int
		subject          string
	}{
		{"removals", func() {
			e.removeFlags("bulk", 0, 20)
			e.person("rm", "--quiet", "default/flipt.io-v1-Flag-locked.json")
		}, 20, 0, 1, 1, "cairn: sync delete 20 resources by " + jane},
		{"removals and adds", func() {
			e.removeFlags("bulk", 20, 40)
			e.write("new", flagFile("new", true))
		}, 20, 1, 0, 2, "cairn: sync create Flag default/new (resource version 1) by " + jane},
	} {
		e.person("pull", "--quiet", "--ff-only", "origin", "main") // cairn's import commits
		tc.change()
		e.pushAll(tc.name)
		tree := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}")
		commits, pushed := e.remote.Commits(t), pushes.Load()
		res, err := s.Sync(ctx)
		if err != nil || res.Deleted != tc.deleted || res.Created != tc.created || res.Skipped != tc.skipped {
			t.Fatalf("%s: Sync = %+v, %v; want %d deleted, %d created, %d skipped", tc.name, res, err, tc.deleted, tc.created, tc.skipped)
		}
		if n := e.remote.Commits(t) - commits; n != tc.commits {
			t.Errorf("%s: the sync made %d commits, want %d", tc.name, n, tc.commits)
		}
		if n := pushes.Load() - pushed; n != int64(tc.commits) {
			t.Errorf("%s: the sync pushed %d times, want %d", tc.name, n, tc.commits)
		}
		if got := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}"); got != tree {
			t.Errorf("%s: the sync changed Jane's files", tc.name)
		}
		log := gittest.Git(t, e.remote.Path, "log", fmt.Sprintf("-%d", tc.commits), "--format=%B%x00", "main")
		if !strings.Contains(log, "cairn: sync delete 20 resources by "+jane) || !strings.Contains(log, tc.subject) {
			t.Errorf("%s: cairn's commits:\n%.800s", tc.name, log)
		}
	}
	for i := range 40 {
		if _, err := e.get(fmt.Sprintf("bulk-%04d", i)); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("bulk-%04d after its removal: %v, want NotFound", i, err)
		}
	}
	if inst, err := e.get("locked"); err != nil || inst.ID != locked {
		t.Errorf("the locked Flag after its removal: %+v, %v; want it kept", inst, err)
	}
	pending, err := e.h.PendingIntents(ctx)
	if err != nil || len(pending) != 0 {
		t.Errorf("intents left: %+v, %v", pending, err)
	}
	// Another replica (a fresh cache) agrees: nothing to do.
	commits := e.remote.Commits(t)
	e.open(t.TempDir())
	if res, err := e.syncer().Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("Sync on a fresh cache = %+v, %v; want nothing", res, err)
	}
	if n := e.remote.Commits(t) - commits; n != 0 {
		t.Errorf("the fresh cache's sync made %d commits", n)
	}
}

// TestWebhooksDuringASyncQueueOneMore: five pushes notified while a sync
// of the backend runs (the remote holds its fetch) each get 202, and
// together they queue one sync after it, not five: two syncs in all, the
// second importing what was pushed meanwhile.
func TestWebhooksDuringASyncQueueOneMore(t *testing.T) {
	r := gittest.NewRemote(t)
	var hold atomic.Pointer[chan struct{}]
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if c := hold.Load(); c != nil && strings.HasSuffix(req.URL.Path, "/git-upload-pack") {
				<-*c
			}
			h.ServeHTTP(w, req)
		})
	})
	e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
	e.create("seed", true)
	svc, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: e.h, Opener: e.opener, WebhookWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	hook := func() (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/hooks/git/flags-repo", "application/json", strings.NewReader(`{"ref":"refs/heads/main"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	e.person("status")
	e.writeFlags("first", 2)
	e.pushAll("two flags")

	release := make(chan struct{})
	hold.Store(&release)
	for i := range 5 {
		if code, body := hook(); code != http.StatusAccepted || !strings.Contains(body, `"running":true`) {
			t.Fatalf("webhook %d while a sync runs: %d %s, want 202 running", i, code, body)
		}
		if i == 0 {
			// Pushed after the running sync's fetch began: the queued
			// sync must import it.
			e.writeFlags("later", 1)
			e.pushAll("one more")
		}
	}
	hold.Store(nil)
	close(release)
	sy, err := svc.Syncer(context.Background(), "flags-repo")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sy.Stats().Created < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the webhooks' syncs did not finish: %+v", sy.Stats())
		}
		time.Sleep(10 * time.Millisecond) // polling the status, bounded by the deadline
	}
	svc.Close() // waits for the webhooks' syncs
	// The held one and the queued one.
	if st := sy.Stats(); st.Syncs != 2 || st.Created != 3 || st.Failures != 0 {
		t.Errorf("stats after 5 webhooks during a sync = %+v, want 2 syncs, 3 created", st)
	}
	if inst, err := e.get("later-0000"); err != nil || inst.Latest.CreatedBy != jane {
		t.Errorf("later-0000: %+v, %v", inst.Latest, err)
	}
}
